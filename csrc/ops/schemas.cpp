// Every graphprobe operator schema, in one place.
//
// The ops return nothing and declare no mutation: a declared mutation would
// make inductor's cudagraph trees skip the graph and invite
// auto-functionalization to clone the input. They are kept alive through
// dead-code elimination by being marked side-effectful (graphprobe/_ops.py).
#include <torch/library.h>

TORCH_LIBRARY(graphprobe, m) {
  // Reduces x into a row of the engine's record table for the current step.
  // entry: name template with "{n}" for the call index; place: dotted path
  // of x inside the call; extras: the part's non-tensor leaves.
  m.def("record_stats(Tensor x, str entry, str place, bool requires_grad, str extras) -> ()");
  // Writes x to {stem}_{n}{suffix} every time it executes (acl_save).
  m.def("save(Tensor x, str path) -> ()");
}
