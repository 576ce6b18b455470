#include <pybind11/stl.h>

#include "engine/engine.h"
#include "engine/step_output.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace graphprobe::python {

void bind_engine(py::module_& m) {
  m.def(
      "finish_step",
      [](std::optional<std::string> out_dir, const std::string& task, const std::string& level,
         bool write_if_empty) {
        StepReport r;
        {
          py::gil_scoped_release nogil;  // device synchronisation can take a while
          r = finish_step_and_write(out_dir, task, level, write_if_empty);
        }
        py::dict summary;
        summary["dropped"] = r.dropped;
        summary["written"] = r.written;
        summary["write_seq"] = r.write_seq;
        summary["entries"] = r.entries;
        summary["tensors"] = r.tensors;
        summary["missing_tensors"] = r.missing_tensors;
        summary["overwritten"] = r.overwritten;
        if (!r.error.empty()) summary["error"] = r.error;
        return summary;
      },
      py::arg("out_dir"), py::arg("task"), py::arg("level"), py::arg("write_if_empty") = true,
      "Ends the current step: writes out_dir/dump.json (unless out_dir is None, or nothing was recorded and "
      "write_if_empty is false) from the rows written in it, then starts the next one.");
  m.def("set_active", [](bool active) { Engine::get().set_active(active); });
  m.def("set_enabled", [](bool enabled) { Engine::get().set_enabled(enabled); });
  m.def(
      "set_tensor_staging", [](std::optional<std::string> dir) { Engine::get().set_tensor_staging(std::move(dir)); },
      py::arg("dir"), "Tensor task: stage every recorded tensor in `dir` (None: statistics only).");
  m.def("reset", [] { Engine::get().reset(); });
}

}  // namespace graphprobe::python
