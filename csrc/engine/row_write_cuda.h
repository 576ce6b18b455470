#pragma once
// Launcher of the kernel that writes statistics computed by compiled code
// (fused into the kernels producing the tensor) into a record-table row.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace graphprobe {

// Launches on the current stream of `values`' device: stamps `row` as the
// statistics kernels do and copies the five float64 values into it. No host
// synchronisation, so it is safe inside graph capture.
void launch_write_values_cuda(const at::Tensor& values, double* row, const int64_t* epoch, unsigned long long* seq,
                              const int64_t* enabled);

}  // namespace graphprobe
