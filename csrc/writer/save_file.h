#pragma once
// The bytes of the torch.save file of one saved tensor (acl_save files and
// the tensor task's staged tensors), written by the writer thread.

#include <ATen/core/Tensor.h>

#include <vector>

namespace graphprobe::writer {

// Whether a tensor of this dtype can be written as a file that torch.load
// reads back bit for bit: the dtypes of format/pt_archive.h's table (not the
// quantized ones, not the sub-byte int1..7 / uint1..7, which torch cannot
// copy or save either).
bool writable_dtype(c10::ScalarType dtype);

// Throws TypeError (TORCH_CHECK_TYPE) for a dtype writable_dtype() refuses,
// naming it and what to do instead: acl_save's check at the call, shared by
// the CPU and CUDA paths. The tensor task checks writable_dtype() itself
// and skips the file instead, since a probe must not raise in forward.
void check_writable(const at::Tensor& x);

// The torch.save file of `t` (a CPU tensor): the zip format of Python's
// torch.save, which torch.load reads also with weights_only=True. Dtypes with
// a legacy storage class go through torch::pickle_save as before; the others
// (float8, uint16/32/64, complex32, float4_e2m1fn_x2, bits) as Python's
// torch.save writes them, _rebuild_tensor_v3 with UntypedStorage and the
// dtype, because torch::pickle_save names storage classes
// (torch.Float8_e4m3fnStorage) that torch.load does not know.
std::vector<char> tensor_file_bytes(const at::Tensor& t);

}  // namespace graphprobe::writer
