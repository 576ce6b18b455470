// Every graphprobe operator schema, in one place.
//
// The ops return nothing and declare no mutation: a declared mutation would
// make inductor's cudagraph trees skip the graph and invite
// auto-functionalization to clone the input. They are kept alive through
// dead-code elimination by being marked side-effectful (graphprobe/_ops.py).
//
// Both carry the nondeterministic_seeded tag: without it FakeTensor and
// make_fx run an op whose inputs are all constants (a probe of
// `torch.tensor(0.0)`) for real while tracing, to propagate constants, and
// inductor may constant-fold it: the op would record or save during
// compilation, several times, and never in the compiled code.
#include <ATen/core/enum_tag.h>
#include <torch/library.h>

TORCH_LIBRARY(graphprobe, m) {
  // Reduces x into a row of the engine's record table for the current step.
  // site: the call part registered when the probe was inserted
  // (csrc/identity); index: x's position among that part's tensors.
  m.def("record_stats(Tensor x, int site, int index) -> ()", {at::Tag::nondeterministic_seeded});
  // Writes x to {stem}_{n}{suffix} every time it executes (acl_save).
  m.def("save(Tensor x, str path) -> ()", {at::Tag::nondeterministic_seeded});
}
