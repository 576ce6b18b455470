// The runtimes by device type. Registered once per type, read on every probe:
// lock-free reads of pointers that are never freed.
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <string>

#include "runtime/device_runtime.h"
#include "runtime/host_copy_warning.h"

namespace graphprobe::runtime {
namespace {

constexpr size_t kTypes = static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES);

std::array<std::atomic<DeviceRuntime*>, kTypes>& table() {
  static std::array<std::atomic<DeviceRuntime*>, kTypes> runtimes{};  // trivially destructible
  return runtimes;
}

std::string registered_names() {
  std::string out = "cpu";
  for (size_t t = 0; t < kTypes; ++t) {
    if (t == static_cast<size_t>(c10::DeviceType::CPU)) continue;
    if (DeviceRuntime* rt = table()[t].load(std::memory_order_acquire)) out += std::string(", ") + rt->name();
  }
  return out;
}

}  // namespace

DeviceRuntime* find_runtime(c10::DeviceType type) {
  const auto t = static_cast<size_t>(type);
  return t < kTypes ? table()[t].load(std::memory_order_acquire) : nullptr;
}

DeviceRuntime& runtime_for(c10::DeviceType type) {
  if (DeviceRuntime* rt = find_runtime(type)) return *rt;
  TORCH_CHECK(type != c10::DeviceType::CUDA, kBuiltWithoutCuda, "record CUDA tensors");
  TORCH_CHECK(type != c10::DeviceType::PrivateUse1,
              "graphprobe: tensors on ", c10::DeviceTypeName(type, /*lower_case=*/true),
              " are not supported: no device runtime is registered for it. On Ascend NPUs import torch_npu "
              "before graphprobe, with graphprobe built where torch_npu imports (it then builds "
              "graphprobe._C_npu); supported now: ", registered_names());
  TORCH_CHECK(false, "graphprobe: tensors on ", c10::DeviceTypeName(type, /*lower_case=*/true),
              " are not supported yet (supported: ", registered_names(), ")");
}

void warn_host_copy_once(const c10::Device& device) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  TORCH_WARN("graphprobe: ", device, " has no graphprobe runtime: probes on it record, and acl_save saves, from a "
             "copy of the tensor on the host (slower; impossible inside a graph capture). On Ascend NPUs import "
             "torch_npu before graphprobe so that its runtime is registered.");
}

void register_runtime(c10::DeviceType type, DeviceRuntime* rt) {
  const auto t = static_cast<size_t>(type);
  TORCH_CHECK(t < kTypes && rt != nullptr, "graphprobe: internal error: registering a runtime for device type ",
              static_cast<int>(type));
  DeviceRuntime* expected = nullptr;
  // A second registration for the same type keeps the first: tables and
  // captured graphs already hold it.
  table()[t].compare_exchange_strong(expected, rt, std::memory_order_acq_rel);
}

}  // namespace graphprobe::runtime
