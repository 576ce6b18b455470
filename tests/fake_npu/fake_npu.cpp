// A fake PrivateUse1 device for tests only: host memory behind a device
// type of its own, so that graphprobe's NPU path (PrivateUse1 kernels, the
// aten-op statistics table, the runtime layer) runs on a machine without an
// Ascend NPU. Renamed to "npu" by tests/fake_npu/__init__.py.
//
//  * allocator, device guard, empty/empty_strided/views/_copy_from/resize_:
//    registered kernels;
//  * other *aten* ops: the CPU fallback. Any other namespace (graphprobe's
//    own ops above all) fails loudly: a catch-all fallback would run
//    graphprobe's CPU kernels and the tests would prove nothing about the
//    PrivateUse1 ones;
//  * an emulated graph capture: between capture_begin() and capture_end() on
//    the capturing thread, device work (aten ops, copies into device memory,
//    the runtime's copies and host functions) is recorded, not run; replay()
//    runs it in order. Ops that return new tensors are run once at capture on
//    the current contents, for their shapes only (as a capture allocates
//    them), and rerun into those outputs on every replay.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/device_runtime.h"

namespace fake_npu {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

// ------------------------------------------------------------ capture state

struct CaptureState {
  std::mutex mu;
  bool capturing = false;
  std::thread::id thread;
  uint64_t id = 0;
  std::vector<std::function<void()>> work;                  // of the capture under way
  std::vector<std::vector<std::function<void()>>> graphs;   // kept: replays may come at any time
  int64_t host_funcs = 0;                                   // host functions run (eager or replayed)
};

CaptureState& state() {
  static auto* s = new CaptureState();  // never destroyed: graphs hold device memory
  return *s;
}

// Work done at capture time for shapes only (see the file comment) runs now.
thread_local int suspended = 0;

struct Suspend {
  Suspend() { ++suspended; }
  ~Suspend() { --suspended; }
};

bool capturing_here() {
  CaptureState& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  return s.capturing && suspended == 0 && s.thread == std::this_thread::get_id();
}

// Runs `fn` now, or records it into the capture under way.
void enqueue(std::function<void()> fn) {
  if (capturing_here()) {
    CaptureState& s = state();
    const std::lock_guard<std::mutex> lock(s.mu);
    s.work.push_back(std::move(fn));
    return;
  }
  fn();
}

// ------------------------------------------------------------ memory

void delete_host(void* p) { std::free(p); }

struct HostAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = std::calloc(n == 0 ? 1 : n, 1);
    TORCH_CHECK(p != nullptr, "fake npu: out of memory");
    return {p, p, &delete_host, c10::Device(kType, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_host; }
  void copy_data(void* dst, const void* src, std::size_t count) const override { std::memcpy(dst, src, count); }
};

HostAllocator allocator;
REGISTER_ALLOCATOR(kType, &allocator)

// ------------------------------------------------------------ device guard

struct FakeGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device) const override { return {kType, 0}; }
  c10::Device getDevice() const override { return {kType, 0}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.index() <= 0, "fake npu: only device 0 exists, got ", d);
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const override { return c10::Stream(c10::Stream::DEFAULT, {kType, 0}); }
  c10::Stream exchangeStream(c10::Stream) const override { return c10::Stream(c10::Stream::DEFAULT, {kType, 0}); }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, FakeGuardImpl);

// ------------------------------------------------------------ kernels

// A CPU tensor over the same host memory as fake tensor t.
at::Tensor host_alias(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), at::TensorOptions().dtype(t.scalar_type()));
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>,
                               std::optional<c10::MemoryFormat> memory_format) {
  return at::detail::empty_generic(size, &allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>) {
  return at::detail::empty_strided_generic(size, stride, &allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool) {
  auto copy = [self, dst] {
    at::Tensor d = dst.is_cpu() ? dst : host_alias(dst);
    const at::Tensor s = self.is_cpu() ? self : host_alias(self);
    d.copy_(s);
  };
  // A copy into device memory is device work; a copy out to a CPU tensor is
  // the host reading (synchronous, as torch's .cpu() is).
  if (dst.device().type() == kType) enqueue(copy);
  else copy();
  return dst;
}

const at::Tensor& resize_in_place(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat>) {
  const int64_t numel = c10::multiply_integers(size);
  const size_t bytes = static_cast<size_t>(numel + self.storage_offset()) * self.itemsize();
  if (bytes > self.storage().nbytes()) at::native::resize_bytes_nocuda(self.storage(), c10::SymInt(static_cast<int64_t>(bytes)));
  self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize_in_place(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

// Which argument a returned alias refers to (in-place and out= ops).
int aliased_argument(const c10::FunctionSchema& schema, const c10::Argument& ret) {
  const c10::AliasInfo* info = ret.alias_info();
  if (info == nullptr) return -1;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::AliasInfo* a = schema.arguments()[i].alias_info();
    if (a != nullptr && a->isWrite() && a->beforeSets() == info->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  TORCH_CHECK(schema.name().rfind("aten::", 0) == 0, "fake npu: ", schema.name(),
              " has no PrivateUse1 kernel; only aten ops fall back to CPU here (a fallback for other namespaces "
              "would run their CPU kernels and hide the missing one)");
  if (!capturing_here()) return at::native::cpu_fallback(op, stack);
  const size_t nargs = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(nargs), stack->end());
  if (schema.is_mutable()) {
    // Mutates device memory: recorded, not run. Its results are the
    // arguments it mutates.
    std::vector<c10::IValue> results;
    for (const auto& ret : schema.returns()) {
      const int a = aliased_argument(schema, ret);
      TORCH_CHECK(a >= 0, "fake npu: ", schema.name(), " cannot be captured (a mutating op with a fresh result)");
      results.push_back(args[static_cast<size_t>(a)]);
    }
    torch::jit::drop(*stack, nargs);
    for (auto& r : results) stack->push_back(r);
    enqueue([op, args] {
      torch::jit::Stack s(args.begin(), args.end());
      at::native::cpu_fallback(op, &s);
    });
    return;
  }
  {
    const Suspend now;  // shapes only: the outputs a capture would allocate
    at::native::cpu_fallback(op, stack);
  }
  const size_t nrets = schema.returns().size();
  std::vector<c10::IValue> outputs(stack->end() - static_cast<std::ptrdiff_t>(nrets), stack->end());
  enqueue([op, args, outputs] {
    torch::jit::Stack s(args.begin(), args.end());
    at::native::cpu_fallback(op, &s);
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].isTensor()) continue;
      at::Tensor dst = outputs[i].toTensor();
      const at::Tensor src = s[i].toTensor();
      host_alias(dst).copy_(src.is_cpu() ? src : host_alias(src));
    }
  });
}

}  // namespace
}  // namespace fake_npu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &fake_npu::empty_memory_format);
  m.impl("empty_strided", &fake_npu::empty_strided);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("_copy_from", &fake_npu::copy_from);
  m.impl("_copy_from_and_resize", &fake_npu::copy_from_and_resize);
  m.impl("resize_", &fake_npu::resize_in_place);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fake_npu::fallback>());
}

namespace fake_npu {
namespace {

// ------------------------------------------------------------ the runtime

class FakeRuntime final : public graphprobe::runtime::DeviceRuntime {
 public:
  const char* name() const override { return "npu"; }
  graphprobe::capture::CaptureStatus capture_status(c10::DeviceIndex) override {
    return capturing_here() ? graphprobe::capture::CaptureStatus::kActive : graphprobe::capture::CaptureStatus::kNone;
  }
  uint64_t current_capture_id() override {
    if (!capturing_here()) return 0;
    const std::lock_guard<std::mutex> lock(state().mu);
    return state().id;
  }
  // The table keeps the tensor for the life of the process; there is no
  // graph pool to stay out of here. Zeroed now, also while capturing.
  at::Tensor allocate_table(c10::DeviceIndex, int64_t words) override {
    const Suspend now;
    return at::zeros({words}, at::TensorOptions().dtype(at::kInt).device(kType, 0));
  }
  void* allocate_pinned(c10::DeviceIndex, size_t bytes) override {
    void* p = std::calloc(bytes == 0 ? 1 : bytes, 1);
    TORCH_CHECK(p != nullptr, "fake npu: out of memory");
    return p;
  }
  void copy_to_host_async(c10::DeviceIndex, void* dst, const void* src, size_t bytes) override {
    enqueue([=] { std::memcpy(dst, src, bytes); });
  }
  void launch_host_func(c10::DeviceIndex, graphprobe::runtime::HostFunc fn, void* data) override {
    enqueue([=] {
      {
        const std::lock_guard<std::mutex> lock(state().mu);
        ++state().host_funcs;
      }
      fn(data);
    });
  }
  void copy_to_host(c10::DeviceIndex, void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_device(c10::DeviceIndex, void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void synchronize(c10::DeviceIndex) override {}  // replays run to the end in replay()
};

void register_runtime(const pybind11::capsule& registrar) {
  TORCH_CHECK(std::strcmp(registrar.name(), graphprobe::runtime::kRegistrarCapsule) == 0,
              "fake npu: graphprobe's runtime registrar is '", registrar.name(), "', this device was built for '",
              graphprobe::runtime::kRegistrarCapsule, "'");
  static auto* rt = new FakeRuntime();  // never destroyed, like every registered runtime
  auto fn = reinterpret_cast<graphprobe::runtime::RegisterFn>(registrar.get_pointer());
  fn(static_cast<int>(kType), rt);
}

void capture_begin() {
  CaptureState& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  TORCH_CHECK(!s.capturing, "fake npu: a capture is already under way");
  s.capturing = true;
  s.thread = std::this_thread::get_id();
  s.id += 1;
  s.work.clear();
}

int64_t capture_end() {
  CaptureState& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  TORCH_CHECK(s.capturing, "fake npu: no capture is under way");
  s.capturing = false;
  s.graphs.push_back(std::move(s.work));
  s.work.clear();
  return static_cast<int64_t>(s.graphs.size()) - 1;
}

void replay(int64_t graph) {
  std::vector<std::function<void()>>* work = nullptr;
  {
    CaptureState& s = state();
    const std::lock_guard<std::mutex> lock(s.mu);
    TORCH_CHECK(graph >= 0 && graph < static_cast<int64_t>(s.graphs.size()), "fake npu: no graph ", graph);
    work = &s.graphs[static_cast<size_t>(graph)];
  }
  for (auto& fn : *work) fn();
}

int64_t work_items(int64_t graph) {
  const std::lock_guard<std::mutex> lock(state().mu);
  return static_cast<int64_t>(state().graphs.at(static_cast<size_t>(graph)).size());
}

int64_t host_funcs() {
  const std::lock_guard<std::mutex> lock(state().mu);
  return state().host_funcs;
}

}  // namespace
}  // namespace fake_npu

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("register_runtime", &fake_npu::register_runtime, "Registers this device's runtime with graphprobe._C.");
  m.def("capture_begin", &fake_npu::capture_begin);
  m.def("capture_end", &fake_npu::capture_end, "Ends the capture; returns the graph's number.");
  m.def("replay", &fake_npu::replay);
  m.def("work_items", &fake_npu::work_items, "Device work items recorded in a graph.");
  m.def("host_funcs", &fake_npu::host_funcs, "Host functions run so far (eager or replayed).");
}
