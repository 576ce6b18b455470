// The device-runtime registry as Python sees it: a capsule through which an
// extension that implements a runtime (graphprobe._C_npu, the tests' fake
// device) registers it, and the capture state of PrivateUse1 for the wiring.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/pybind11.h>

#include "python/bindings.h"
#include "runtime/device_runtime.h"

namespace py = pybind11;

namespace graphprobe::python {
namespace {

void register_from_extension(int device_type, runtime::DeviceRuntime* rt) {
  runtime::register_runtime(static_cast<c10::DeviceType>(device_type), rt);
}

}  // namespace

void bind_runtime(py::module_& m) {
  m.def(
      "runtime_registrar",
      [] {
        // The name carries the interface's version: an extension built
        // against another layout of DeviceRuntime must not register.
        return py::capsule(reinterpret_cast<void*>(static_cast<runtime::RegisterFn>(&register_from_extension)),
                           runtime::kRegistrarCapsule);
      },
      "A capsule holding graphprobe::runtime::RegisterFn, for extensions that implement a device runtime.");
  m.def(
      "privateuse1_capturing",
      [] {
        runtime::DeviceRuntime* rt = runtime::find_runtime(c10::DeviceType::PrivateUse1);
        return rt != nullptr && rt->current_capture_id() != 0;
      },
      "Whether a graph capture is under way on the current PrivateUse1 (NPU) stream; False without its runtime.");
  m.def(
      "synchronize_privateuse1",
      [] {
        runtime::DeviceRuntime* rt = runtime::find_runtime(c10::DeviceType::PrivateUse1);
        if (rt == nullptr) return;
        const c10::DeviceIndex device =
            c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
        py::gil_scoped_release nogil;
        rt->synchronize(device);
      },
      "Waits for the current PrivateUse1 (NPU) device, when its runtime is registered (flush()).");
  m.def(
      "has_runtime",
      [](const std::string& device_type) {
        return runtime::find_runtime(c10::Device(device_type).type()) != nullptr;
      },
      py::arg("device_type"), "Whether a device runtime is registered for `device_type` ('cuda', 'npu', ...).");
}

}  // namespace graphprobe::python
