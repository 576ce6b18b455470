// Kernels of graphprobe::record_values, the op that writes statistics fused
// into compiled code into the record table.
#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>
#include <torch/library.h>

#include <vector>

#include "engine/engine.h"
#include "runtime/device_runtime.h"

namespace graphprobe {
namespace {

void record_values(const at::Tensor& values, int64_t site, int64_t index, c10::ScalarType dtype,
                   c10::SymIntArrayRef shape) {
  // Real kernels see concrete sizes: symbols are resolved by the time compiled code runs.
  // A device without a graphprobe runtime: the five statistics go to the host table.
  const bool own_runtime = values.is_cpu() || runtime::find_runtime(values.device().type()) != nullptr;
  Engine::get().record_values(own_runtime ? values : values.to(c10::Device(c10::kCPU)), site, index, dtype,
                              C10_AS_INTARRAYREF_SLOW(shape));
}

void record_values_meta(const at::Tensor&, int64_t, int64_t, c10::ScalarType, c10::SymIntArrayRef) {}

}  // namespace
}  // namespace graphprobe

TORCH_LIBRARY_IMPL(graphprobe, CPU, m) { m.impl("record_values", &graphprobe::record_values); }
TORCH_LIBRARY_IMPL(graphprobe, CUDA, m) { m.impl("record_values", &graphprobe::record_values); }
TORCH_LIBRARY_IMPL(graphprobe, PrivateUse1, m) { m.impl("record_values", &graphprobe::record_values); }
TORCH_LIBRARY_IMPL(graphprobe, CompositeExplicitAutograd, m) { m.impl("record_values", &graphprobe::record_values); }
TORCH_LIBRARY_IMPL(graphprobe, Meta, m) { m.impl("record_values", &graphprobe::record_values_meta); }
