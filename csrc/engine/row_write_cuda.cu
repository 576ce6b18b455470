#include "engine/row_write_cuda.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "record/row.h"

namespace graphprobe {
namespace {

// One thread: the epoch, sequence and live switch are read from device
// memory, so a captured launch uses their values at replay time.
// `sketched`: values holds the four sketch sums after the statistics.
__global__ void write_values_row(const double* __restrict__ values, int sketched, double* row, const int64_t* epoch,
                                 unsigned long long* seq, const int64_t* enabled) {
  if (*enabled == 0) return;
  const double e = static_cast<double>(*epoch);
  row[column::kWrites] = row[column::kStamp] == e ? row[column::kWrites] + 1.0 : 1.0;
  row[column::kStamp] = e;
  row[column::kSeq] = static_cast<double>(atomicAdd(seq, 1ULL) + 1ULL);
  for (int c = column::kMax; c <= column::kNanCount; ++c) row[c] = values[c];
  row[column::kHashed] = 0.0;  // no checksum from precomputed statistics
  for (int k = 0; k < 4; ++k)
    row[column::kSketch0 + k] = sketched ? values[column::kNanCount + 1 + k] : __longlong_as_double(0x7ff8000000000000LL);
}

}  // namespace

void launch_write_values_cuda(const at::Tensor& values, double* row, const int64_t* epoch, unsigned long long* seq,
                              const int64_t* enabled) {
  const c10::cuda::CUDAGuard guard(values.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(values.device().index()).stream();
  const int sketched = values.numel() > column::kNanCount + 1 ? 1 : 0;
  write_values_row<<<1, 1, 0, stream>>>(values.const_data_ptr<double>(), sketched, row, epoch, seq, enabled);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace graphprobe
