// The CUDA kernel of graphprobe::save (acl_save). Built only against a CUDA
// torch (setup.py compiles *_cuda.cpp files then).
//
// Eager: an asynchronous copy into pinned host memory and an event on the
// caller's stream; the writer thread polls the event. The caller's host
// thread never waits for the device.
//
// Capture (the current stream is being captured into a CUDA graph): nothing
// runs now. The graph gets a device-to-host copy into a pinned staging buffer
// and a host node (cudaLaunchHostFunc) whose C++ callback, on every replay,
// copies the staging bytes into a new host buffer and hands it to the writer.
// No Python runs per replay.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capture/capture_mode.h"
#include "engine/devices_used.h"
#include "writer/device_thread.h"
#include "writer/immortal.h"
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

// --------------------------------------------------------------- capture

struct PinnedFree {
  void operator()(void* p) const {
    if (p) (void)cudaFreeHost(p);
  }
};

// What the host node of one captured save needs on every replay. Kept for
// the life of the process (see kept_points): a graph can be replayed at any
// time and graphprobe cannot see when the user drops it. The cost is the
// staging buffer (x's size in pinned memory) per captured save point.
struct ReplayPoint {
  writer::SaveTarget target;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes;
  size_t nbytes = 0;
  std::unique_ptr<void, PinnedFree> staging;
};

struct KeptPoints {
  std::mutex mu;
  std::deque<std::unique_ptr<ReplayPoint>> points;
};

KeptPoints& kept_points() {
  // Never destroyed: a replay (and its callback) may still run while static
  // destructors run at exit.
  static Immortal<KeptPoints> kept;
  return kept.get();
}

// The host node. Runs on a CUDA driver thread after the staging copy of this
// replay has landed; it must not call CUDA, must not take the GIL and must
// not throw. It may wait for budget, which holds back the stream (and so the
// next replay) until the writer catches up: nothing is dropped.
void CUDART_CB on_replay(void* payload) {
  const auto* p = static_cast<const ReplayPoint*>(payload);
  if (p->target.gate != nullptr && !p->target.gate->load(std::memory_order_relaxed)) return;
  writer::Writer::get().submit_from_callback(p->target.path, p->target.numbered, p->dtype, p->sizes,
                                             p->staging.get(), p->nbytes);
}

void save_captured(const at::Tensor& x, const writer::SaveTarget& target, cudaStream_t stream) {
  // Under capture this records a copy kernel into the graph (its buffer comes
  // from the graph's pool and is read by the copy below in stream order).
  const at::Tensor src = x.resolve_conj().resolve_neg().contiguous();
  auto point = std::make_unique<ReplayPoint>();
  point->target = target;
  point->dtype = x.scalar_type();
  point->sizes = x.sizes().vec();
  point->nbytes = x.nbytes();
  {
    // cudaHostAlloc is not a stream operation; relaxed mode lets this thread
    // call it while its stream captures.
    const capture::RelaxedCaptureMode relaxed;
    void* staging = nullptr;
    C10_CUDA_CHECK(cudaHostAlloc(&staging, std::max<size_t>(point->nbytes, 1), cudaHostAllocDefault));
    point->staging.reset(staging);
  }
  if (point->nbytes > 0) {
    C10_CUDA_CHECK(cudaMemcpyAsync(point->staging.get(), src.const_data_ptr(), point->nbytes, cudaMemcpyDeviceToHost,
                                   stream));
  }
  C10_CUDA_CHECK(cudaLaunchHostFunc(stream, &on_replay, point.get()));
  auto& kept = kept_points();
  const std::lock_guard<std::mutex> lock(kept.mu);
  kept.points.push_back(std::move(point));
}

}  // namespace

namespace writer {

void save_tensor_cuda(const at::Tensor& x, const SaveTarget& target) {
  TORCH_CHECK(x.layout() == c10::kStrided, "graphprobe.acl_save: only dense (strided) tensors can be saved, got a ",
              x.layout(), " tensor");
  const c10::cuda::CUDAGuard guard(x.device());
  note_device_used(x.device().index());
  // The autograd fallback leaves grad mode on: copies made here must not join
  // the autograd graph, nor be saved with requires_grad.
  const at::Tensor v = x.detach();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  if (capture::stream_is_capturing(stream)) {
    save_captured(v, target, stream);
  } else {
    save_eager(v, target, stream);
  }
}

}  // namespace writer

namespace {

void save_cuda(const at::Tensor& x, c10::string_view path) {
  writer::save_tensor_cuda(x, writer::SaveTarget{std::string(path), /*numbered=*/true, nullptr});
}

}  // namespace
}  // namespace graphprobe

TORCH_LIBRARY_IMPL(graphprobe, CUDA, m) { m.impl("save", &graphprobe::save_cuda); }
