// Kernels of graphprobe::save (acl_save) for CPU and Meta. The CUDA kernel,
// with its eager and graph-capture paths, is in csrc/writer/save_cuda.cpp and
// is built only against a CUDA torch.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "writer/writer.h"

namespace graphprobe {
namespace {

void save_cpu(const at::Tensor& x, c10::string_view path) {
  TORCH_CHECK(x.layout() == c10::kStrided, "graphprobe.acl_save: only dense (strided) tensors can be saved, got a ",
              x.layout(), " tensor");
  auto& w = writer::Writer::get();
  // Reserve before copying: the budget bounds the copies themselves.
  writer::Reservation r = w.reserve(x.nbytes(), writer::Producer::kHost, /*device_pending=*/false);
  writer::WriteJob job;
  // A copy of the values (not a view, and contiguous): the caller may change
  // x in place before the writer gets to it, and non-contiguous inputs are
  // saved as their values.
  // A lazily conjugated or negated view is saved as the values it shows.
  // detach(): the autograd fallback still has grad mode on here, and the
  // copy must neither join the graph nor be saved with requires_grad.
  job.tensor = x.detach().resolve_conj().resolve_neg().clone(at::MemoryFormat::Contiguous);
  job.file = w.next_file(std::string(path));
  w.submit(std::move(r), std::move(job));
}

// Tracing (FakeTensor / meta) must not write anything.
void save_meta(const at::Tensor&, c10::string_view) {}

}  // namespace
}  // namespace graphprobe

TORCH_LIBRARY_IMPL(graphprobe, CPU, m) { m.impl("save", &graphprobe::save_cpu); }
TORCH_LIBRARY_IMPL(graphprobe, Meta, m) { m.impl("save", &graphprobe::save_meta); }
