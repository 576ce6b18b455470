#pragma once
// The device-runtime layer: what the engine and the writer need from an
// accelerator's runtime, in one small interface, with one implementation per
// runtime (cpu_runtime.cpp, cuda_runtime_cuda.cpp, and the NPU one in the
// optional graphprobe._C_npu extension, csrc/npu/). Everything above this
// layer (Engine::record, the record tables' step protocol, the writer) talks
// to a DeviceRuntime and never asks which device it is.
//
// Device guards are c10's (c10::DeviceGuard works for every registered
// device type); everything else a probe does on a device goes through here.
//
// A runtime registered from another shared object (the NPU extension, the
// fake test device) implements every method itself: the vtable crosses the
// library boundary, plain functions of graphprobe._C do not.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>

#include "capture/capture_status.h"

namespace graphprobe::runtime {

// A function the device's stream calls on the host (cudaLaunchHostFunc,
// aclrtLaunchHostFunc). It must not throw.
using HostFunc = void (*)(void*);

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  // For messages: "cpu", "cuda", "npu".
  virtual const char* name() const = 0;

  // The capture status of the current stream of `device`.
  virtual capture::CaptureStatus capture_status(c10::DeviceIndex device) = 0;

  // An id of the graph capture under way on the current stream of the
  // current device; 0 when none.
  virtual uint64_t current_capture_id() = 0;

  // A zeroed int32 tensor of `words` elements on `device` for a record
  // table. Its memory is never freed (graphs keep its address) and lies
  // outside every graph's memory pool: allowed while a stream of `device` is
  // capturing (the thread is put in relaxed capture mode for the allocation).
  virtual at::Tensor allocate_table(c10::DeviceIndex device, int64_t words) = 0;

  // `bytes` of page-locked host memory for a captured copy's destination;
  // never freed (a captured graph writes it on every replay).
  virtual void* allocate_pinned(c10::DeviceIndex device, size_t bytes) = 0;

  // Enqueues a device-to-host copy on the current stream of `device`;
  // captured with it while it captures.
  virtual void copy_to_host_async(c10::DeviceIndex device, void* dst, const void* src, size_t bytes) = 0;

  // Enqueues fn(data) on the current stream of `device`; captured, it runs
  // on every replay, after the work captured before it.
  virtual void launch_host_func(c10::DeviceIndex device, HostFunc fn, void* data) = 0;

  // A synchronous device-to-host copy that is also allowed inside a host
  // function and while another stream captures (NPU: the thread switches to
  // relaxed capture mode first, or the copy fails with error 107030).
  virtual void copy_to_host(c10::DeviceIndex device, void* dst, const void* src, size_t bytes) = 0;

  // A synchronous host-to-device copy (the table's counters), outside capture.
  virtual void copy_to_device(c10::DeviceIndex device, void* dst, const void* src, size_t bytes) = 0;

  // Waits until all work queued on `device` has finished.
  virtual void synchronize(c10::DeviceIndex device) = 0;
};

// The start of every error for a CUDA tensor met by a build against a
// CPU-only torch; the caller ends it with what it could not do ("record
// CUDA tensors").
inline constexpr char kBuiltWithoutCuda[] =
    "graphprobe was built without CUDA support; reinstall it against a CUDA build of torch "
    "(pip install --no-build-isolation .) to ";

// The runtime of `type`. Throws a message naming the device and the
// supported ones when none is registered.
DeviceRuntime& runtime_for(c10::DeviceType type);

// nullptr when none is registered.
DeviceRuntime* find_runtime(c10::DeviceType type);

// Registers `rt` for `type` for the rest of the process (it is never
// destroyed: captured graphs may call into it at exit). CPU and CUDA are
// registered by graphprobe._C itself; PrivateUse1 by the extension that
// implements it (graphprobe._C_npu), reached through _C.runtime_registrar().
void register_runtime(c10::DeviceType type, DeviceRuntime* rt);

// The C signature handed to other extensions in a capsule named
// kRegistrarCapsule (graphprobe._C.runtime_registrar()). Bump the version
// when DeviceRuntime changes.
using RegisterFn = void (*)(int device_type, DeviceRuntime* rt);
constexpr const char* kRegistrarCapsule = "graphprobe.runtime_registrar.v1";

}  // namespace graphprobe::runtime
