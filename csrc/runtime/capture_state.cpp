// Capture state as the engine asks for it, through the device runtimes.
#include "runtime/capture_state.h"

#include "runtime/device_runtime.h"

namespace graphprobe {

bool is_capturing(const at::Tensor& x) {
  const c10::Device d = x.device();
  if (d.is_cpu()) return false;
  return capture::counts_as_capturing(runtime::runtime_for(d.type()).capture_status(d.index()));
}

uint64_t current_capture_id() {
  // The accelerators that can capture; a process captures on one of them.
  for (const c10::DeviceType type : {c10::DeviceType::CUDA, c10::DeviceType::PrivateUse1}) {
    if (runtime::DeviceRuntime* rt = runtime::find_runtime(type)) {
      if (const uint64_t id = rt->current_capture_id()) return id;
    }
  }
  return 0;
}

}  // namespace graphprobe
