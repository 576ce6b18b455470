#pragma once
// The fused statistics kernels for CUDA. Torch-free, so that they compile
// (and can be checked with nvcc) without the ATen headers.
//
// begin_row (one thread) stamps the row with the current epoch and the next
// sequence number, counts repeated writes within an epoch, and resets the
// accumulators; accumulate_row then reads every element once and folds each
// block's partial max/min/sum/sum-of-squares/NaN-count into the row with one
// atomic per statistic per block. The epoch and sequence live in device
// memory, so a captured graph reads their current values on every replay; so
// does the live switch `enabled`: while it is 0 both kernels return at once.

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "engine/row.h"

namespace graphprobe::kernels {

constexpr int kThreads = 256;

// Integers (bool included) convert to double directly: through float, 32-
// and 64-bit values would lose digits. Floating types of at most 32 bits
// (half, bfloat16, float8) convert through float, exactly: without
// --use_fast_math (setup.py) the conversions keep subnormals.
template <typename T>
__device__ inline double to_double(T v) {
  if constexpr (std::is_integral_v<T> || std::is_same_v<T, double>) {
    return static_cast<double>(v);
  } else {
    return static_cast<double>(static_cast<float>(v));
  }
}

__device__ inline void atomic_max(double* addr, double v) {
  auto* p = reinterpret_cast<unsigned long long*>(addr);
  unsigned long long old = *p;
  while (__longlong_as_double(static_cast<long long>(old)) < v) {
    const unsigned long long assumed = old;
    old = atomicCAS(p, assumed, static_cast<unsigned long long>(__double_as_longlong(v)));
    if (old == assumed) break;
  }
}

__device__ inline void atomic_min(double* addr, double v) {
  auto* p = reinterpret_cast<unsigned long long*>(addr);
  unsigned long long old = *p;
  while (__longlong_as_double(static_cast<long long>(old)) > v) {
    const unsigned long long assumed = old;
    old = atomicCAS(p, assumed, static_cast<unsigned long long>(__double_as_longlong(v)));
    if (old == assumed) break;
  }
}

__global__ void begin_row(double* row, const int64_t* epoch, unsigned long long* seq, const int64_t* enabled) {
  if (*enabled == 0) return;
  const double e = static_cast<double>(*epoch);
  row[kWrites] = row[kStamp] == e ? row[kWrites] + 1.0 : 1.0;
  row[kStamp] = e;
  row[kSeq] = static_cast<double>(atomicAdd(seq, 1ULL) + 1ULL);
  row[kMax] = -__longlong_as_double(0x7ff0000000000000LL);
  row[kMin] = __longlong_as_double(0x7ff0000000000000LL);
  row[kSum] = 0.0;
  row[kSumSq] = 0.0;
  row[kNanCount] = 0.0;
}

struct Partial {
  double mx, mn, s, sq, nan;
};

__device__ inline Partial merge(Partial a, const Partial& b) {
  a.mx = b.mx > a.mx ? b.mx : a.mx;
  a.mn = b.mn < a.mn ? b.mn : a.mn;
  a.s += b.s;
  a.sq += b.sq;
  a.nan += b.nan;
  return a;
}

__device__ inline Partial shuffle_down(const Partial& p, int offset) {
  return Partial{__shfl_down_sync(0xffffffffu, p.mx, offset), __shfl_down_sync(0xffffffffu, p.mn, offset),
                 __shfl_down_sync(0xffffffffu, p.s, offset), __shfl_down_sync(0xffffffffu, p.sq, offset),
                 __shfl_down_sync(0xffffffffu, p.nan, offset)};
}

template <typename T>
__global__ void __launch_bounds__(kThreads) accumulate_row(const T* __restrict__ x, int64_t n, double* row,
                                                          const int64_t* enabled) {
  if (*enabled == 0) return;
  const double inf = __longlong_as_double(0x7ff0000000000000LL);
  Partial p{-inf, inf, 0.0, 0.0, 0.0};
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double v = to_double(x[i]);
    // A NaN compares false: it is counted, not folded into max/min.
    p.mx = v > p.mx ? v : p.mx;
    p.mn = v < p.mn ? v : p.mn;
    p.nan += (v != v) ? 1.0 : 0.0;
    p.s += v;
    p.sq += v * v;
  }
  for (int offset = 16; offset > 0; offset >>= 1) p = merge(p, shuffle_down(p, offset));
  __shared__ Partial warps[kThreads / 32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = p;
  __syncthreads();
  if (warp == 0) {
    p = lane < static_cast<int>(blockDim.x >> 5) ? warps[lane] : Partial{-inf, inf, 0.0, 0.0, 0.0};
    for (int offset = 16; offset > 0; offset >>= 1) p = merge(p, shuffle_down(p, offset));
    if (lane == 0) {
      atomic_max(row + kMax, p.mx);
      atomic_min(row + kMin, p.mn);
      atomicAdd(row + kSum, p.s);
      atomicAdd(row + kSumSq, p.sq);
      if (p.nan > 0) atomicAdd(row + kNanCount, p.nan);
    }
  }
}

// Blocks for n elements: enough to fill the device, never more than needed.
inline unsigned int blocks_for(int64_t n, int multiprocessors) {
  const int64_t needed = (n + kThreads - 1) / kThreads;
  const int64_t cap = static_cast<int64_t>(multiprocessors) * 8;
  const int64_t b = needed < cap ? needed : cap;
  return static_cast<unsigned int>(b < 1 ? 1 : b);
}

}  // namespace graphprobe::kernels
