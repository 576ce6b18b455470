// Stand-in for the CUDA record table when the engine is built without CUDA
// (a CPU-only torch). No CUDA tensor can exist then, so this is reached only
// through a broken install; it says so instead of crashing.
#ifndef GRAPHPROBE_WITH_CUDA

#include <c10/util/Exception.h>

#include "engine/device_table.h"
#include "runtime/device_runtime.h"

namespace graphprobe {

std::unique_ptr<DeviceTable> make_cuda_table(int, int64_t, bool) {
  TORCH_CHECK(false, runtime::kBuiltWithoutCuda, "record CUDA tensors");
}

}  // namespace graphprobe

#endif
