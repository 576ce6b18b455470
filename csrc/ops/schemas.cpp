// Every graphprobe operator schema, in one place, and where each registers
// its kernels (TORCH_LIBRARY_IMPL), by dispatch key:
//
//   op                    kernels in              dispatch keys
//   record_stats          ops/record_stats.cpp    CPU SparseCPU SparseCsrCPU CUDA PrivateUse1
//                                                 CompositeExplicitAutograd Meta FuncTorchBatched
//   record_stats_fusable  ops/record_stats.cpp    (as record_stats)
//   record_mirror         ops/record_stats.cpp    (as record_stats)
//   record_values         ops/record_values.cpp   CPU CUDA PrivateUse1 CompositeExplicitAutograd Meta
//   save                  ops/save.cpp            CPU CUDA* PrivateUse1 Meta FuncTorchBatched
//
// * only in a build against a CUDA torch (GRAPHPROBE_WITH_CUDA).
// The Meta kernels are the fake kernels torch.compile traces with; every op
// passes torch.library.opcheck (tests/test_ops_opcheck.py, which also checks
// this table against the dispatcher).
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
  //
  // flexible_layout: the kernels read any strides, and inductor's default
  // for a custom op (needs_exact_strides) gave every probe of a tensor not
  // yet in memory (a fused pointwise result, e.g. a GELU probed as one
  // module's output and the next one's input) a private copy of it: the
  // producing loop stored the same values once per probe, and each probe
  // read its own copy (tests/test_dump_l0.py::test_a_probed_pointwise_result_is_stored_once).
  m.def("record_stats(Tensor x, int site, int index) -> ()",
        {at::Tag::nondeterministic_seeded, at::Tag::flexible_layout});
  // A second probe of a tensor that another probe of the same compiled graph
  // already reads (a module's output that is the next module's input).
  // Inductor's lowering of record_stats emits it (wiring/shared_probes.py):
  // the row of (site, index) is the row of (source_site, source_index) in
  // every step, so x is not read again. x is passed so that the op runs on
  // x's device and, in the tensor task, can still record x itself.
  m.def("record_mirror(Tensor x, int site, int index, int source_site, int source_index) -> ()",
        {at::Tag::nondeterministic_seeded, at::Tag::flexible_layout});
  // The same probe, inserted by dynamo where the statistics may be fused
  // into compiled code (statistics task, fused statistics switched on). A
  // name of its own so that the choice is part of the traced graph, and so
  // of every compile cache key (AOTAutogradCache and FxGraphCache key on
  // that graph). form: the version of inductor's lowering of this op
  // (wiring/fused_stats.py), a constant in the graph so that code compiled
  // by an earlier lowering is never reused from those caches. Its kernels
  // are record_stats's: only inductor's lowering differs.
  // It keeps inductor's default layout rule: its lowering
  // (wiring/fused_stats.py) fuses the reductions into the loop that
  // realises x under that rule, the form its tests and benchmarks measured.
  m.def("record_stats_fusable(Tensor x, int site, int index, int form) -> ()", {at::Tag::nondeterministic_seeded});
  // What record_stats_fusable becomes inside inductor's code (wiring/fused_stats.py):
  // the reductions are ordinary graph ops fused into the producer of the
  // tensor, and this op only writes their results into the row of (site,
  // index). values: float64 [max, min, sum, sum of squares, NaN count] on the
  // tensor's device; dtype and shape: the probed tensor's.
  m.def("record_values(Tensor values, int site, int index, ScalarType dtype, SymInt[] shape) -> ()",
        {at::Tag::nondeterministic_seeded});
  // Writes x to {stem}_{n}{suffix} every time it executes (acl_save).
  m.def("save(Tensor x, str path) -> ()", {at::Tag::nondeterministic_seeded});
}
