// The Ascend NPU runtime (torch_npu + CANN's ACL). Built only into the
// optional graphprobe._C_npu, and only where torch_npu imports (setup.py);
// scripts/check_npu_compile.sh compiles it against the torch-npu wheel's
// headers. Registered with graphprobe._C through its runtime registrar, so
// graphprobe._C itself never links torch_npu.
//
// Compile-checked only: no Ascend machine has run it (docs/limitations.md;
// scripts/npu_check.sh is the check for that day).
#include <acl/acl_rt.h>
#include <pybind11/pybind11.h>
#include <torch/extension.h>
#include <torch_npu/csrc/aten/common/from_blob.h>
#include <torch_npu/csrc/core/npu/NPUException.h>
#include <torch_npu/csrc/core/npu/NPUGraphsUtils.h>
#include <torch_npu/csrc/core/npu/NPUGuard.h>
#include <torch_npu/csrc/core/npu/NPUStream.h>

#include <cstring>

#include "runtime/device_runtime.h"

namespace graphprobe::npu {
namespace {

// Puts this thread in relaxed capture mode for its lifetime: allocations and
// synchronous copies are then allowed while a stream captures. Without it a
// copy fails with error 107030 ("current capture mode does not support this
// operation"), as vLLM-Ascend users report.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { NPU_CHECK_ERROR(aclmdlRICaptureThreadExchangeMode(&previous_)); }
  ~RelaxedCaptureMode() { (void)aclmdlRICaptureThreadExchangeMode(&previous_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  aclmdlRICaptureMode previous_ = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
};

aclrtStream current_stream(c10::DeviceIndex device) { return c10_npu::getCurrentNPUStream(device).stream(); }

class NpuRuntime final : public runtime::DeviceRuntime {
 public:
  const char* name() const override { return "npu"; }

  capture::CaptureStatus capture_status(c10::DeviceIndex device) override {
    // torch_npu's CaptureStatus mirrors aclmdlRICaptureStatus (None 0,
    // Active 1, Invalidated 2), as capture_status.h's numbers do.
    return capture::capture_status_from_cuda(static_cast<int>(c10_npu::captureStatusMayInitCtx(current_stream(device))));
  }

  uint64_t current_capture_id() override {
    const std::optional<c10_npu::CaptureId_t> id = c10_npu::currentStreamCaptureIdMayInitCtx();
    return id ? static_cast<uint64_t>(*id) : 0;
  }

  at::Tensor allocate_table(c10::DeviceIndex device, int64_t words) override {
    const c10_npu::NPUGuard guard(device);
    const RelaxedCaptureMode relaxed;
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(words);
    void* p = nullptr;
    // Raw ACL memory, not torch_npu's caching allocator: under capture that
    // would hand out memory of the graph's private pool.
    NPU_CHECK_ERROR(aclrtMalloc(&p, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    NPU_CHECK_ERROR(aclrtMemset(p, bytes, 0, bytes));
    return at_npu::native::from_blob(p, {words}, [](void*) {},
                                     at::TensorOptions().dtype(at::kInt).device(c10::DeviceType::PrivateUse1, device));
  }

  void* allocate_pinned(c10::DeviceIndex device, size_t bytes) override {
    const c10_npu::NPUGuard guard(device);
    const RelaxedCaptureMode relaxed;
    void* p = nullptr;
    NPU_CHECK_ERROR(aclrtMallocHost(&p, bytes == 0 ? 1 : bytes));
    return p;
  }

  void copy_to_host_async(c10::DeviceIndex device, void* dst, const void* src, size_t bytes) override {
    NPU_CHECK_ERROR(aclrtMemcpyAsync(dst, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_HOST, current_stream(device)));
  }

  void launch_host_func(c10::DeviceIndex device, runtime::HostFunc fn, void* data) override {
    // aclrtLaunchHostFunc, not aclrtLaunchCallback plus a report thread:
    // msprobe moved to it "to avoid thread creation and deadlock".
    NPU_CHECK_ERROR(aclrtLaunchHostFunc(current_stream(device), fn, data));
  }

  void copy_to_host(c10::DeviceIndex device, void* dst, const void* src, size_t bytes) override {
    const c10_npu::NPUGuard guard(device);
    const RelaxedCaptureMode relaxed;
    NPU_CHECK_ERROR(aclrtMemcpy(dst, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
  }

  void copy_to_device(c10::DeviceIndex device, void* dst, const void* src, size_t bytes) override {
    const c10_npu::NPUGuard guard(device);
    const RelaxedCaptureMode relaxed;
    NPU_CHECK_ERROR(aclrtMemcpy(dst, bytes, src, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  }

  void synchronize(c10::DeviceIndex device) override {
    const c10_npu::NPUGuard guard(device);
    NPU_CHECK_ERROR(aclrtSynchronizeDevice());
  }
};

void register_runtime(const pybind11::capsule& registrar) {
  TORCH_CHECK(std::strcmp(registrar.name(), runtime::kRegistrarCapsule) == 0,
              "graphprobe._C_npu: graphprobe._C's runtime registrar is '", registrar.name(), "', this extension was "
              "built for '", runtime::kRegistrarCapsule, "'; rebuild graphprobe (both modules come from one build)");
  static auto* rt = new NpuRuntime();  // never destroyed: captured graphs may call into it at exit
  reinterpret_cast<runtime::RegisterFn>(registrar.get_pointer())(static_cast<int>(c10::DeviceType::PrivateUse1), rt);
}

}  // namespace
}  // namespace graphprobe::npu

PYBIND11_MODULE(_C_npu, m) {
  m.doc() = "graphprobe's Ascend NPU runtime (torch_npu, ACL); registered with graphprobe._C on import of graphprobe";
  m.def("register_runtime", &graphprobe::npu::register_runtime, pybind11::arg("registrar"),
        "Registers the NPU runtime through graphprobe._C.runtime_registrar().");
}
