#include "stats/stats_cuda.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <array>
#include <atomic>
#include <type_traits>

#include "stats/checksum.h"
#include "stats/checksum_cpu.h"
#include "stats/checksum_kernel.cuh"
#include "stats/reducible_types.h"
#include "stats/stats_kernel.cuh"

namespace graphprobe {
namespace {

// Multiprocessors of `device`, asked once per device. cudaDeviceGetAttribute
// is not a stream operation, so it is allowed during capture.
int multiprocessors(c10::DeviceIndex device) {
  static std::array<std::atomic<int>, 64> known{};
  if (device >= 0 && device < static_cast<c10::DeviceIndex>(known.size())) {
    const int cached = known[static_cast<size_t>(device)].load(std::memory_order_relaxed);
    if (cached > 0) return cached;
  }
  int count = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  if (device >= 0 && device < static_cast<c10::DeviceIndex>(known.size()))
    known[static_cast<size_t>(device)].store(count, std::memory_order_relaxed);
  return count;
}

// The checksum of contiguous x's words into `row` (checksum_kernel.cuh).
void launch_checksum(const at::Tensor& x, int64_t n, double* row, const int64_t* enabled, unsigned int blocks,
                     cudaStream_t stream) {
  const int64_t word = checksum::word_bytes(x.element_size());
  const int64_t m = n * static_cast<int64_t>(x.element_size()) / word;
  const void* p = x.const_data_ptr();
  switch (word) {
    case 1:
      kernels::checksum_row<uint8_t><<<blocks, kernels::kThreads, 0, stream>>>(static_cast<const uint8_t*>(p), m, row, enabled);
      break;
    case 2:
      kernels::checksum_row<uint16_t><<<blocks, kernels::kThreads, 0, stream>>>(static_cast<const uint16_t*>(p), m, row, enabled);
      break;
    case 4:
      kernels::checksum_row<uint32_t><<<blocks, kernels::kThreads, 0, stream>>>(static_cast<const uint32_t*>(p), m, row, enabled);
      break;
    default:
      kernels::checksum_row<uint64_t><<<blocks, kernels::kThreads, 0, stream>>>(static_cast<const uint64_t*>(p), m, row, enabled);
      break;
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void launch_stats_cuda(const at::Tensor& input, double* row, const int64_t* epoch, unsigned long long* seq,
                       const int64_t* enabled, bool checksum) {
  const c10::cuda::CUDAGuard guard(input.device());
  const c10::DeviceIndex device = input.device().index();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  const int64_t n = input.numel();
  // A type without a kernel (complex, float4, quantised) only stamps its row;
  // its record carries no statistics. What can throw is done before the
  // first launch, so that a capture is never left with half a probe.
  const bool reduce = n > 0 && stats::reducible(input.scalar_type());
  const bool hash = checksum && checksum::hashable(input);
  // Under capture this copy is captured too and replays with the graph.
  const at::Tensor x = reduce || hash ? input.resolve_conj().resolve_neg().contiguous() : input;
  const unsigned int blocks =
      reduce || hash ? kernels::blocks_for(n, static_cast<int64_t>(input.element_size()), multiprocessors(device)) : 1;
  kernels::begin_row<<<1, 1, 0, stream>>>(row, epoch, seq, enabled, hash ? 1 : 0);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (hash) launch_checksum(x, n, row, enabled, blocks, stream);
  if (!reduce) return;
  stats::dispatch_reducible(x.scalar_type(), "graphprobe_stats_cuda", [&](auto tag) {
    using scalar_t = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
    kernels::accumulate_row<scalar_t>
        <<<blocks, kernels::kThreads, 0, stream>>>(x.const_data_ptr<scalar_t>(), n, row, enabled);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace graphprobe
