// Kernels of graphprobe::save (acl_save) for CPU, PrivateUse1 (the NPU) and
// Meta. The saving itself is writer::save_tensor; the CUDA kernel, with its eager and graph-capture
// paths, is in csrc/writer/save_cuda.cpp and is built only against a CUDA torch.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "writer/save_target.h"

namespace graphprobe {

namespace {

void save_host_or_runtime(const at::Tensor& x, c10::string_view path) {
  writer::save_tensor(x, writer::SaveTarget{std::string(path), /*numbered=*/true, nullptr});
}

// Tracing (FakeTensor / meta) must not write anything.
void save_meta(const at::Tensor&, c10::string_view) {}

void save_batched(const at::Tensor&, c10::string_view path) {
  TORCH_CHECK(false, "graphprobe.acl_save('", std::string(path), "'): called inside torch.vmap, where the tensor is one "
              "example of a batch; call acl_save outside the vmapped function to save the whole batch");
}

}  // namespace
}  // namespace graphprobe

TORCH_LIBRARY_IMPL(graphprobe, CPU, m) { m.impl("save", &graphprobe::save_host_or_runtime); }
// The NPU: a synchronous host copy eagerly, a captured copy plus host
// function under capture, through its runtime (writer/save_target.cpp).
TORCH_LIBRARY_IMPL(graphprobe, PrivateUse1, m) { m.impl("save", &graphprobe::save_host_or_runtime); }
TORCH_LIBRARY_IMPL(graphprobe, Meta, m) { m.impl("save", &graphprobe::save_meta); }
TORCH_LIBRARY_IMPL(graphprobe, FuncTorchBatched, m) { m.impl("save", &graphprobe::save_batched); }
