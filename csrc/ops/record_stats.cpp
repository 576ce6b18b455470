// Kernels of graphprobe::record_stats. The same host function serves CPU,
// CUDA and PrivateUse1 (the NPU): the engine routes by device to its table
// and runtime.
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "engine/engine.h"
#include "runtime/device_runtime.h"
#include "runtime/host_copy_warning.h"

namespace graphprobe {
namespace {

// A tensor the engine cannot read where it lies: on a device without a
// graphprobe runtime (MPS, XPU, a PrivateUse1 backend whose runtime was not
// registered, CUDA with a CPU-only build), or not strided (sparse, MKL-DNN;
// the Python wiring normally hands over their values already). A probe must
// never break the model, so such a tensor is recorded from a dense host copy
// through plain aten ops: the same statistics as on the CPU, at the cost of a
// copy. Inside a graph capture the copy fails: a capture needs the device's
// runtime (docs/limitations.md).
bool needs_host_copy(const at::Tensor& x) {
  return x.layout() != c10::kStrided || (!x.is_cpu() && runtime::find_runtime(x.device().type()) == nullptr);
}

at::Tensor host_copy(const at::Tensor& x) {
  if (!x.is_cpu() && runtime::find_runtime(x.device().type()) == nullptr) runtime::warn_host_copy_once(x.device());
  at::Tensor dense = x.detach();
  if (dense.is_sparse()) dense = dense._values();
  else if (dense.layout() != c10::kStrided) dense = dense.to_dense();
  return dense.to(c10::Device(c10::kCPU));
}

void record_stats(const at::Tensor& x, int64_t site, int64_t index) {
  if (needs_host_copy(x)) {
    Engine::get().record(host_copy(x), site, index);
    return;
  }
  Engine::get().record(x, site, index);
}

void record_mirror(const at::Tensor& x, int64_t site, int64_t index, int64_t source_site, int64_t source_index) {
  if (needs_host_copy(x)) {
    Engine::get().record_mirror(host_copy(x), site, index, source_site, source_index);
    return;
  }
  Engine::get().record_mirror(x, site, index, source_site, source_index);
}
// Meta and vmap: as record_stats_meta and record_stats_batched below.
void record_mirror_nothing(const at::Tensor&, int64_t, int64_t, int64_t, int64_t) {}

// Tracing (FakeTensor / meta) must not touch the record table.
void record_stats_meta(const at::Tensor&, int64_t, int64_t) {}

// Inside torch.vmap (transformers builds attention masks with it) a probe
// sees one example of a batched tensor. Without this kernel the op fails
// ("Batching rule not implemented") and breaks the user's model; calls
// inside vmap are not recorded (docs/limitations.md).
void record_stats_batched(const at::Tensor&, int64_t, int64_t) {}

}  // namespace
}  // namespace graphprobe

namespace graphprobe {
namespace {

using ProbeKernel = void (*)(const at::Tensor&, int64_t, int64_t);
using MirrorKernel = void (*)(const at::Tensor&, int64_t, int64_t, int64_t, int64_t);

// record_stats_fusable runs the same kernels; its form only keys compile
// caches (see schemas.cpp).
template <ProbeKernel kernel>
void fusable(const at::Tensor& x, int64_t site, int64_t index, int64_t /*form*/) {
  kernel(x, site, index);
}

template <ProbeKernel kernel, MirrorKernel mirror>
void impl_probe_ops(torch::Library& m) {
  m.impl("record_stats", kernel);
  m.impl("record_stats_fusable", &fusable<kernel>);
  m.impl("record_mirror", mirror);
}

// The kernels of a device: the engine records.
void impl_device_ops(torch::Library& m) { impl_probe_ops<&record_stats, &record_mirror>(m); }

}  // namespace
}  // namespace graphprobe

TORCH_LIBRARY_IMPL(graphprobe, CPU, m) { graphprobe::impl_device_ops(m); }
// Sparse tensors on the CPU: their stored values (see needs_host_copy).
TORCH_LIBRARY_IMPL(graphprobe, SparseCPU, m) { graphprobe::impl_device_ops(m); }
TORCH_LIBRARY_IMPL(graphprobe, SparseCsrCPU, m) { graphprobe::impl_device_ops(m); }
// Every other backend (MPS, XPU, ...): from a host copy (see needs_host_copy).
TORCH_LIBRARY_IMPL(graphprobe, CompositeExplicitAutograd, m) { graphprobe::impl_device_ops(m); }
TORCH_LIBRARY_IMPL(graphprobe, CUDA, m) { graphprobe::impl_device_ops(m); }
// The NPU (torch_npu's device is PrivateUse1): statistics by aten ops
// (engine/aten_table.cpp), once graphprobe._C_npu registered its runtime.
TORCH_LIBRARY_IMPL(graphprobe, PrivateUse1, m) { graphprobe::impl_device_ops(m); }
TORCH_LIBRARY_IMPL(graphprobe, Meta, m) {
  graphprobe::impl_probe_ops<&graphprobe::record_stats_meta, &graphprobe::record_mirror_nothing>(m);
}
TORCH_LIBRARY_IMPL(graphprobe, FuncTorchBatched, m) {
  graphprobe::impl_probe_ops<&graphprobe::record_stats_batched, &graphprobe::record_mirror_nothing>(m);
}
