// graphprobe._C: importing it registers the operators (static initialisers in
// csrc/ops) and exposes the engine's host-side controls.
#include <pybind11/pybind11.h>

#include "fs/atomic_file.h"
#include "python/bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "graphprobe engine: probe ops, record tables, writer";
  // Local: _compare maps the same C++ type to its own class.
  pybind11::register_local_exception<graphprobe::fs::IoError>(m, "IoError", PyExc_OSError);
  graphprobe::python::bind_engine(m);
  graphprobe::python::bind_writer(m);
  graphprobe::python::bind_tensor_compare(m);
  graphprobe::python::bind_runtime(m);
  graphprobe::python::bind_version_watch(m);
}
