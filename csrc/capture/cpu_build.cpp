// Stand-in for the CUDA record table when the engine is built without CUDA
// (a CPU-only torch). No CUDA tensor can exist then, so this is reached only
// through a broken install; it says so instead of crashing.
#ifndef GRAPHPROBE_WITH_CUDA

#include <c10/util/Exception.h>

#include "engine/device_table.h"

namespace graphprobe {

std::unique_ptr<DeviceTable> make_cuda_table(int, int64_t, bool) {
  TORCH_CHECK(false, "graphprobe was built without CUDA support; reinstall it against a CUDA build of torch "
                     "(pip install --no-build-isolation .) to record CUDA tensors");
}

}  // namespace graphprobe

#endif
