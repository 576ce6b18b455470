// The CUDA runtime. Built only against a CUDA torch; registered by
// graphprobe._C at load time.
#include <ATen/ops/from_blob.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "capture/capture_mode.h"
#include "runtime/devices_used.h"
#include "runtime/device_runtime.h"
#include "util/immortal.h"

namespace graphprobe::runtime {
namespace {

cudaStream_t current_stream(c10::DeviceIndex device) { return c10::cuda::getCurrentCUDAStream(device).stream(); }

class CudaRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "cuda"; }

  capture::CaptureStatus capture_status(c10::DeviceIndex device) override {
    return capture::stream_capture_status(current_stream(device));
  }

  uint64_t current_capture_id() override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    C10_CUDA_CHECK(cudaStreamGetCaptureInfo(c10::cuda::getCurrentCUDAStream().stream(), &status, &id));
    // An invalidated capture still has an id: its calls go nowhere, and the
    // user sees CUDA's own error when the capture ends.
    return status == cudaStreamCaptureStatusNone ? 0 : static_cast<uint64_t>(id);
  }

  // The CUDA record table (engine/cuda_table_cuda.cpp) has kernels of its
  // own and allocates itself; this serves the generic table only.
  at::Tensor allocate_table(c10::DeviceIndex device, int64_t words) override {
    const c10::cuda::CUDAGuard guard(device);
    const capture::RelaxedCaptureMode relaxed;
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(words);
    void* p = nullptr;
    C10_CUDA_CHECK(cudaMalloc(&p, bytes));
    C10_CUDA_CHECK(cudaMemset(p, 0, bytes));
    return at::from_blob(p, {words}, [](void*) {}, at::TensorOptions().dtype(c10::kInt).device(c10::kCUDA, device));
  }

  void* allocate_pinned(c10::DeviceIndex device, size_t bytes) override {
    const c10::cuda::CUDAGuard guard(device);
    // cudaHostAlloc is not a stream operation; relaxed mode lets this thread
    // call it while its stream captures.
    const capture::RelaxedCaptureMode relaxed;
    void* p = nullptr;
    C10_CUDA_CHECK(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault));
    return p;
  }

  void copy_to_host_async(c10::DeviceIndex device, void* dst, const void* src, size_t bytes) override {
    C10_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, current_stream(device)));
  }

  void launch_host_func(c10::DeviceIndex device, HostFunc fn, void* data) override {
    C10_CUDA_CHECK(cudaLaunchHostFunc(current_stream(device), fn, data));
  }

  void copy_to_host(c10::DeviceIndex device, void* dst, const void* src, size_t bytes) override {
    const c10::cuda::CUDAGuard guard(device);
    const capture::RelaxedCaptureMode relaxed;
    C10_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }

  void copy_to_device(c10::DeviceIndex device, void* dst, const void* src, size_t bytes) override {
    const c10::cuda::CUDAGuard guard(device);
    C10_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }

  void synchronize(c10::DeviceIndex device) override {
    const c10::cuda::CUDAGuard guard(device);
    C10_CUDA_CHECK(cudaDeviceSynchronize());
  }
};

const bool registered = [] {
  static Immortal<CudaRuntime> cuda;
  register_runtime(c10::DeviceType::CUDA, &cuda.get());
  return true;
}();

}  // namespace
}  // namespace graphprobe::runtime
