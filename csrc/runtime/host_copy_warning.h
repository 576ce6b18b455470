#pragma once
// The one warning for a device without a graphprobe runtime (MPS, XPU, a
// PrivateUse1 backend other than Ascend's): probes record, and acl_save
// saves, from a copy of the tensor on the host. Given once per process,
// whichever of them meets such a device first.
#include <c10/core/Device.h>

namespace graphprobe::runtime {

void warn_host_copy_once(const c10::Device& device);

}  // namespace graphprobe::runtime
