#pragma once
// The summary_mode "md5" checksum (stats/checksum.h) of a CPU tensor, and
// which tensors have one on every device.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace graphprobe::checksum {

// Whether a tensor gets a checksum: a strided, non-empty tensor of a type the
// statistics kernels reduce (stats/reducible_types.h) or of a complex type.
// Quantized, sub-byte and packed types get none (their record's md5 is null).
bool hashable(const at::Tensor& x);

// The checksum of x's bits, or nullopt where !hashable(x). Large tensors are
// hashed on torch's intra-op threads; the value does not depend on how many.
std::optional<uint64_t> checksum_cpu(const at::Tensor& x);

}  // namespace graphprobe::checksum
