// The CPU runtime: no streams, no capture; host functions run at once and
// copies are memcpy. Registered by graphprobe._C at load time.
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>

#include <ATen/ops/zeros.h>

#include "runtime/device_runtime.h"
#include "util/immortal.h"

namespace graphprobe::runtime {
namespace {

class CpuRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "cpu"; }
  capture::CaptureStatus capture_status(c10::DeviceIndex) override { return capture::CaptureStatus::kNone; }
  uint64_t current_capture_id() override { return 0; }
  at::Tensor allocate_table(c10::DeviceIndex, int64_t words) override {
    return at::zeros({words}, at::TensorOptions().dtype(c10::kInt));
  }
  void* allocate_pinned(c10::DeviceIndex, size_t bytes) override {
    void* p = std::calloc(bytes == 0 ? 1 : bytes, 1);
    TORCH_CHECK(p != nullptr, "graphprobe: out of host memory (", bytes, " bytes)");
    return p;
  }
  void copy_to_host_async(c10::DeviceIndex, void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void launch_host_func(c10::DeviceIndex, HostFunc fn, void* data) override { fn(data); }
  void copy_to_host(c10::DeviceIndex, void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_to_device(c10::DeviceIndex, void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void synchronize(c10::DeviceIndex) override {}
};

const bool registered = [] {
  static Immortal<CpuRuntime> cpu;  // never destroyed, like every registered runtime
  register_runtime(c10::DeviceType::CPU, &cpu.get());
  return true;
}();

}  // namespace
}  // namespace graphprobe::runtime
