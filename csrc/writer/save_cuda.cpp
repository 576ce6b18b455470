// The CUDA half of writer::save_tensor, behind the CUDA kernel of
// graphprobe::save (acl_save, registered in ops/save.cpp). Built only against
// a CUDA torch (setup.py compiles *_cuda.cpp files then).
//
// Eager: an asynchronous copy into pinned host memory and an event on the
// caller's stream; the writer thread polls the event. The caller's host
// thread never waits for the device.
//
// Capture (the current stream is being captured into a CUDA graph): the
// runtime-generic captured save (writer/save_captured.cpp) with the CUDA
// runtime: a captured copy into pinned staging memory and a host node
// (cudaLaunchHostFunc) handing the bytes to the writer on every replay.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <memory>
#include <string>
#include <vector>

#include "capture/capture_mode.h"
#include "runtime/devices_used.h"
#include "runtime/device_runtime.h"
#include "writer/device_thread.h"
#include "writer/save_captured.h"
#include "writer/save_file.h"
#include "writer/save_target.h"
#include "writer/writer.h"

namespace graphprobe {
namespace {

// --------------------------------------------------------------- eager

// The writer thread's CUDA calls (see writer/device_thread.h).
struct CudaThreadOps {
  void set_device(int device) { C10_CUDA_CHECK(cudaSetDevice(device)); }
  void relax_capture_mode() { capture::relax_this_thread(); }
};

// The completion of an eager device-to-host copy. Polled (never waited on)
// by the writer thread; destroyed there too, after prepare_thread().
class EventReady final : public writer::DeviceReady {
 public:
  EventReady(cudaStream_t stream, int device) : device_(device) {
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    const cudaError_t err = cudaEventRecord(event_, stream);
    if (err != cudaSuccess) {
      (void)cudaEventDestroy(event_);
      C10_CUDA_CHECK(err);
    }
  }
  EventReady(const EventReady&) = delete;
  EventReady& operator=(const EventReady&) = delete;
  ~EventReady() override { (void)cudaEventDestroy(event_); }

  void prepare_thread() override {
    thread_local writer::DeviceThread<CudaThreadOps> thread;
    CudaThreadOps ops;
    thread.enter(device_, ops);
  }

  bool done() override {
    const cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();  // NotReady is not sticky, but keep the error state clean
      return false;
    }
    C10_CUDA_CHECK(err);
    return true;
  }

 private:
  const int device_;
  cudaEvent_t event_ = nullptr;
};

void save_eager(const at::Tensor& x, const writer::SaveTarget& target, cudaStream_t stream) {
  auto& w = writer::Writer::get();
  writer::Reservation r = w.reserve(x.nbytes(), writer::Producer::kHost, /*device_pending=*/true);
  writer::WriteJob job;
  // Contiguous pinned destination: copy_ with non_blocking=true is then a
  // cudaMemcpyAsync on the current stream (a non-contiguous source is first
  // made contiguous on the device, in stream order), and torch's pinned
  // allocator keeps the block until that copy is done.
  job.tensor = at::empty(x.sizes(), x.options().device(c10::kCPU).pinned_memory(true));
  job.tensor.copy_(x, /*non_blocking=*/true);
  job.ready = std::make_unique<EventReady>(stream, x.device().index());
  job.file = target.numbered ? w.next_file(target.path) : target.path;
  w.submit(std::move(r), std::move(job));
}

}  // namespace

namespace writer {

void save_tensor_cuda(const at::Tensor& x, const SaveTarget& target) {
  TORCH_CHECK(x.layout() == c10::kStrided, "graphprobe.acl_save: only dense (strided) tensors can be saved, got a ",
              x.layout(), " tensor");
  // As in save_tensor (the CUDA kernel of the op comes here directly).
  check_writable(x);
  const c10::cuda::CUDAGuard guard(x.device());
  note_device_used(x.device().index());
  // The autograd fallback leaves grad mode on: copies made here must not join
  // the autograd graph, nor be saved with requires_grad.
  const at::Tensor v = x.detach();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  if (capture::stream_is_capturing(stream)) {
    writer::save_captured(runtime::runtime_for(c10::DeviceType::CUDA), v, target);
  } else {
    save_eager(v, target, stream);
  }
}

}  // namespace writer
}  // namespace graphprobe
