// Kernels of graphprobe::record_stats. The same host function serves CPU and
// CUDA: the engine routes by device and, on CUDA, by capture state.
#include <torch/library.h>

#include "engine/engine.h"

namespace graphprobe {
namespace {

void record_stats(const at::Tensor& x, int64_t site, int64_t index) { Engine::get().record(x, site, index); }

// Tracing (FakeTensor / meta) must not touch the record table.
void record_stats_meta(const at::Tensor&, int64_t, int64_t) {}

// Inside torch.vmap (transformers builds attention masks with it) a probe
// sees one example of a batched tensor. Without this kernel the op fails
// ("Batching rule not implemented") and breaks the user's model; calls
// inside vmap are not recorded (docs/limitations.md).
void record_stats_batched(const at::Tensor&, int64_t, int64_t) {}

}  // namespace
}  // namespace graphprobe

// record_stats_fusable runs the same kernels (see schemas.cpp).
TORCH_LIBRARY_IMPL(graphprobe, CPU, m) {
  m.impl("record_stats", &graphprobe::record_stats);
  m.impl("record_stats_fusable", &graphprobe::record_stats);
}
TORCH_LIBRARY_IMPL(graphprobe, CUDA, m) {
  m.impl("record_stats", &graphprobe::record_stats);
  m.impl("record_stats_fusable", &graphprobe::record_stats);
}
TORCH_LIBRARY_IMPL(graphprobe, Meta, m) {
  m.impl("record_stats", &graphprobe::record_stats_meta);
  m.impl("record_stats_fusable", &graphprobe::record_stats_meta);
}
TORCH_LIBRARY_IMPL(graphprobe, FuncTorchBatched, m) {
  m.impl("record_stats", &graphprobe::record_stats_batched);
  m.impl("record_stats_fusable", &graphprobe::record_stats_batched);
}
