#pragma once
// The summary_mode "md5" checksum kernel for CUDA (stats/checksum.h defines
// the value). Torch-free, like stats_kernel.cuh, so that nvcc checks it
// without the ATen headers.
//
// begin_row (stats_kernel.cuh) zeroes the checksum column and sets kHashed;
// checksum_row then reads every word once (a grid-stride loop), sums the
// contributions of its words per thread, per warp (shuffles) and per block
// (shared memory), and adds the block's sum into the column with one 64-bit
// integer atomic. Integer addition modulo 2^64 is associative and
// commutative, so the value does not depend on the order in which blocks
// finish: unlike the floating-point sums, the checksum is deterministic.

#include <cuda_runtime.h>

#include <cstdint>

#include "record/row.h"
#include "stats/checksum.h"
#include "stats/stats_kernel.cuh"

namespace graphprobe::kernels {

// W: the unsigned word type (uint8_t, uint16_t, uint32_t, uint64_t); `m`
// words from `x` (the contiguous tensor's bytes).
template <typename W>
__global__ void __launch_bounds__(kThreads, kBlocksPerSM)
    checksum_row(const W* __restrict__ x, int64_t m, double* row, const int64_t* enabled) {
  if (*enabled == 0) return;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned long long h = 0;
  for (int64_t j = tid; j < m; j += threads)
    h += checksum::mix(static_cast<uint64_t>(__ldg(x + j)), static_cast<uint64_t>(j));
  for (int offset = 16; offset > 0; offset >>= 1) h += __shfl_down_sync(0xffffffffu, h, offset);
  __shared__ unsigned long long warps[kThreads / 32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = h;
  __syncthreads();
  if (warp == 0) {
    h = lane < static_cast<int>(blockDim.x >> 5) ? warps[lane] : 0ULL;
    for (int offset = 16; offset > 0; offset >>= 1) h += __shfl_down_sync(0xffffffffu, h, offset);
    // The column's 8 bytes hold the checksum's bits (record/row.h).
    if (lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(row + column::kChecksum), h);
  }
}

}  // namespace graphprobe::kernels
