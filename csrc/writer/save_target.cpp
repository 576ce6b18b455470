// writer::save_tensor: the CPU path, and the CUDA entry point's stand-in for
// builds without CUDA.
#include "writer/save_target.h"

#include "writer/writer.h"

namespace graphprobe {
namespace writer {

void save_tensor(const at::Tensor& x, const SaveTarget& target) {
  if (x.is_cuda()) return save_tensor_cuda(x, target);
  TORCH_CHECK(x.device().is_cpu(), "graphprobe: saving tensors on ", x.device(), " is not supported (cpu, cuda)");
  TORCH_CHECK(x.layout() == c10::kStrided, "graphprobe.acl_save: only dense (strided) tensors can be saved, got a ",
              x.layout(), " tensor");
  auto& w = Writer::get();
  // Reserve before copying: the budget bounds the copies themselves.
  Reservation r = w.reserve(x.nbytes(), Producer::kHost, /*device_pending=*/false);
  WriteJob job;
  // A copy of the values (not a view, and contiguous): the caller may change
  // x in place before the writer gets to it, and non-contiguous inputs are
  // saved as their values.
  // A lazily conjugated or negated view is saved as the values it shows.
  // detach(): the autograd fallback still has grad mode on here, and the
  // copy must neither join the graph nor be saved with requires_grad.
  job.tensor = x.detach().resolve_conj().resolve_neg().clone(at::MemoryFormat::Contiguous);
  job.file = target.numbered ? w.next_file(target.path) : target.path;
  w.submit(std::move(r), std::move(job));
}

#ifndef GRAPHPROBE_WITH_CUDA
void save_tensor_cuda(const at::Tensor&, const SaveTarget&) {
  TORCH_CHECK(false, "graphprobe was built without CUDA support; reinstall it against a CUDA build of torch "
                     "(pip install --no-build-isolation .) to save CUDA tensors");
}
#endif

}  // namespace writer

}  // namespace graphprobe
