#pragma once
// A save inside graph capture, on any accelerator, through its runtime
// (runtime/device_runtime.h): nothing runs now. The graph gets a
// device-to-host copy into a pinned staging buffer and a host function whose
// C++ callback, on every replay, copies the staging bytes into a writer job
// (no Python, no device call, no dispatcher in the callback).

#include <ATen/core/Tensor.h>

#include "runtime/device_runtime.h"
#include "writer/save_target.h"

namespace graphprobe::writer {

// `x` is on `rt`'s device, whose current stream is capturing.
void save_captured(runtime::DeviceRuntime& rt, const at::Tensor& x, const SaveTarget& target);

}  // namespace graphprobe::writer
