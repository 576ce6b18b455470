// Stand-ins for the CUDA runtime pieces when the engine is built without CUDA
// (a CPU-only torch). No CUDA tensor can exist then, so these are reached only
// through a broken install; they say so instead of crashing.
#ifndef GRAPHPROBE_WITH_CUDA

#include <c10/util/Exception.h>

#include "engine/device_table.h"

namespace graphprobe {

bool is_capturing(const at::Tensor&) { return false; }

uint64_t current_capture_id() { return 0; }

std::unique_ptr<DeviceTable> make_cuda_table(int, int64_t, bool) {
  TORCH_CHECK(false, "graphprobe was built without CUDA support; reinstall it against a CUDA build of torch "
                     "(pip install --no-build-isolation .) to record CUDA tensors");
}

}  // namespace graphprobe

#endif
