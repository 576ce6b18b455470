#pragma once
// Launcher of the fused CUDA statistics kernels (see stats_kernel.cuh).

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace graphprobe {

// Launches on the current stream of x's device: stamps `row` and reduces x
// into it, and with `checksum` hashes x's bits into it (where
// checksum::hashable(x)). No host synchronisation, so it is safe inside graph
// capture.
void launch_stats_cuda(const at::Tensor& x, double* row, const int64_t* epoch, unsigned long long* seq,
                       const int64_t* enabled, bool checksum);

}  // namespace graphprobe
