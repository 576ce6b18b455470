// Whether a tensor was updated in place since a moment of the forward pass,
// for the eager backward probes (src/graphprobe/wiring/backward.py, _Bypass):
// an output updated in place after its call returned has its gradient
// recorded from a hook on the output itself, one that was not is recorded at
// the call's boundary. Python has no handle on a tensor's version counter
// other than the tensor, and holding the tensor would keep its storage alive
// until the backward pass; the counter alone (shared with every view of the
// tensor) costs a few bytes.
#include <c10/core/TensorImpl.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "python/bindings.h"

namespace py = pybind11;

namespace graphprobe::python {
namespace {

class VersionWatch {
 public:
  explicit VersionWatch(const at::Tensor& t)
      : counter_(t.unsafeGetTensorImpl()->version_counter()), at_(counter_.current_version()) {}
  // True once the tensor or one of its views was updated in place.
  bool changed() const { return counter_.current_version() != at_; }

 private:
  c10::VariableVersion counter_;
  uint32_t at_;
};

}  // namespace

void bind_version_watch(py::module_& m) {
  py::class_<VersionWatch>(m, "VersionWatch",
                           "A tensor's version counter as of now, without the tensor: changed() says whether it "
                           "(or a view of it) was updated in place since.")
      .def(py::init<const at::Tensor&>(), py::arg("tensor"))
      .def("changed", &VersionWatch::changed);
}

}  // namespace graphprobe::python
