// writer::save_tensor: the CPU path, the path of accelerators reached
// through their runtime (the NPU), and the CUDA entry point's stand-in for
// builds without CUDA.
#include "writer/save_target.h"

#include <c10/core/DeviceGuard.h>

#include "runtime/device_runtime.h"
#include "runtime/host_copy_warning.h"
#include "writer/save_captured.h"
#include "writer/save_file.h"
#include "writer/writer.h"

namespace graphprobe {
namespace writer {

namespace {

// An accelerator without a save path of its own (the NPU). Captured: the
// runtime-generic captured save. Eager: a synchronous copy to the host,
// then as on CPU (the caller's thread waits for the device). A device
// without a graphprobe runtime (a PrivateUse1 backend other than Ascend's,
// XPU) is saved from that host copy too, as the probes record it: nothing can
// tell a capture there, so a save inside one fails in the copy.
void save_tensor_device(const at::Tensor& x, const SaveTarget& target) {
  runtime::DeviceRuntime* rt = runtime::find_runtime(x.device().type());
  const c10::DeviceGuard guard(x.device());
  const at::Tensor v = x.detach();
  if (rt == nullptr) runtime::warn_host_copy_once(x.device());
  else if (capture::counts_as_capturing(rt->capture_status(x.device().index()))) return save_captured(*rt, v, target);
  auto& w = Writer::get();
  Reservation r = w.reserve(x.nbytes(), Producer::kHost, /*device_pending=*/false);
  WriteJob job;
  job.tensor = v.resolve_conj().resolve_neg().to(c10::kCPU).contiguous();
  job.file = target.numbered ? w.next_file(target.path) : target.path;
  w.submit(std::move(r), std::move(job));
}

}  // namespace

void save_tensor(const at::Tensor& x, const SaveTarget& target) {
  TORCH_CHECK(x.layout() == c10::kStrided, "graphprobe.acl_save: only dense (strided) tensors can be saved, got a ",
              x.layout(), " tensor");
  // At the call, never on the writer thread: a dtype no file can hold is
  // refused before anything is queued.
  check_writable(x);
  if (x.is_cuda()) return save_tensor_cuda(x, target);
  if (!x.device().is_cpu()) return save_tensor_device(x, target);
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
  TORCH_CHECK(false, runtime::kBuiltWithoutCuda, "save CUDA tensors");
}
#endif

}  // namespace writer

}  // namespace graphprobe
