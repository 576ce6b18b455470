#include "stats/stats_cuda.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "stats/stats_kernel.cuh"

namespace graphprobe {

void launch_stats_cuda(const at::Tensor& input, double* row, const int64_t* epoch, unsigned long long* seq,
                       const int64_t* enabled) {
  const c10::cuda::CUDAGuard guard(input.device());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(input.device().index()).stream();
  kernels::begin_row<<<1, 1, 0, stream>>>(row, epoch, seq, enabled);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int64_t n = input.numel();
  if (n == 0) return;
  // Under capture this copy is captured too and replays with the graph.
  const at::Tensor x = input.contiguous();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const unsigned int blocks = kernels::blocks_for(n, sms);
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, x.scalar_type(), "graphprobe_stats_cuda", [&] {
    kernels::accumulate_row<scalar_t><<<blocks, kernels::kThreads, 0, stream>>>(x.const_data_ptr<scalar_t>(), n, row, enabled);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace graphprobe
