// Kernels of graphprobe::record_stats. The same host function serves CPU and
// CUDA: the engine routes by device and, on CUDA, by capture state.
#include <torch/library.h>

#include "engine/engine.h"

namespace graphprobe {
namespace {

void record_stats(const at::Tensor& x, c10::string_view entry, c10::string_view place, bool requires_grad,
                  c10::string_view extras) {
  const std::string e(entry), p(place), x_extras(extras);
  Engine::get().record(x, ProbeSite{e, p, x_extras, requires_grad});
}

// Tracing (FakeTensor / meta) must not touch the record table.
void record_stats_meta(const at::Tensor&, c10::string_view, c10::string_view, bool, c10::string_view) {}

}  // namespace
}  // namespace graphprobe

TORCH_LIBRARY_IMPL(graphprobe, CPU, m) { m.impl("record_stats", &graphprobe::record_stats); }
TORCH_LIBRARY_IMPL(graphprobe, CUDA, m) { m.impl("record_stats", &graphprobe::record_stats); }
TORCH_LIBRARY_IMPL(graphprobe, Meta, m) { m.impl("record_stats", &graphprobe::record_stats_meta); }
