// Kernels of graphprobe::save (acl_save) for CPU, CUDA, PrivateUse1 (the NPU),
// Meta and vmap. The saving itself is writer::save_tensor; the CUDA half,
// with its eager and graph-capture paths, is writer::save_tensor_cuda
// (csrc/writer/save_cuda.cpp), built only against a CUDA torch.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "writer/save_target.h"

namespace graphprobe {

namespace {

void save_host_or_runtime(const at::Tensor& x, c10::string_view path) {
  writer::save_tensor(x, writer::SaveTarget{std::string(path), /*numbered=*/true, nullptr});
}

#ifdef GRAPHPROBE_WITH_CUDA
void save_cuda(const at::Tensor& x, c10::string_view path) {
  writer::save_tensor_cuda(x, writer::SaveTarget{std::string(path), /*numbered=*/true, nullptr});
}
#endif

// Tracing (FakeTensor / meta) must not write anything.
void save_meta(const at::Tensor&, c10::string_view) {}

void save_batched(const at::Tensor&, c10::string_view path) {
  TORCH_CHECK(false, "graphprobe.acl_save('", std::string(path), "'): called inside torch.vmap, where the tensor is one "
              "example of a batch; call acl_save outside the vmapped function to save the whole batch");
}

}  // namespace
}  // namespace graphprobe

TORCH_LIBRARY_IMPL(graphprobe, CPU, m) { m.impl("save", &graphprobe::save_host_or_runtime); }
#ifdef GRAPHPROBE_WITH_CUDA
TORCH_LIBRARY_IMPL(graphprobe, CUDA, m) { m.impl("save", &graphprobe::save_cuda); }
#endif
// The NPU: a synchronous host copy eagerly, a captured copy plus host
// function under capture, through its runtime (writer/save_target.cpp).
TORCH_LIBRARY_IMPL(graphprobe, PrivateUse1, m) { m.impl("save", &graphprobe::save_host_or_runtime); }
TORCH_LIBRARY_IMPL(graphprobe, Meta, m) { m.impl("save", &graphprobe::save_meta); }
TORCH_LIBRARY_IMPL(graphprobe, FuncTorchBatched, m) { m.impl("save", &graphprobe::save_batched); }
