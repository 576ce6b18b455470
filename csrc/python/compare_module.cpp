// graphprobe._compare: the torch-free compare engine.
//
// The boundary is three types: CompareOptions in, CompareResult (shared with
// its Row views) out, DumpFormatError / DumpReadError for bad input. The
// engine runs without the GIL so that threads or a progress bar keep going.
// One binder per part (python/compare/bindings.h); the module's free
// functions are here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "compare/csv_writer.h"
#include "compare/comparison.h"
#include "compare/noise_floor.h"
#include "fs/atomic_file.h"
#include "python/compare/bindings.h"

namespace py = pybind11;
namespace gc = graphprobe::compare;
namespace gcp = graphprobe::compare::python;

PYBIND11_MODULE(_compare, m) {
  m.doc() = "graphprobe compare engine (torch-free): dump.json pairs -> msprobe compare rows";

  py::register_exception<gc::DumpFormatError>(m, "DumpFormatError", PyExc_ValueError);
  // Local: _C maps the same C++ type (fs::IoError) to its own class, and a
  // global registration here would take over the engine's errors.
  py::register_local_exception<graphprobe::fs::IoError>(m, "DumpReadError", PyExc_OSError);

  gcp::bind_options(m);
  gcp::bind_row(m);
  gcp::bind_result(m);
  gcp::bind_checksums(m);
  gcp::bind_profile(m);

  m.def(
      "compare_files",
      [](const std::string& target, const std::string& bench, const gc::CompareOptions& options) {
        return std::make_shared<gc::CompareResult>(gc::compare_files(target, bench, options));
      },
      py::arg("target_path"), py::arg("bench_path"), py::arg("options") = gc::CompareOptions{},
      py::call_guard<py::gil_scoped_release>(),
      "Compares two dump.json files. Raises DumpFormatError (a ValueError) for malformed files and "
      "DumpReadError (an OSError) for unreadable ones.");
  m.def(
      "noise_floor_table",
      []() {
        std::vector<std::tuple<std::string, std::string, double, double>> out;
        for (const auto& f : gc::noise_floor_table()) out.emplace_back(f.name, f.dtypes, f.aggregate, f.extreme);
        return out;
      },
      "The first-divergence rule's noise floors: (name, dtypes covered, aggregate floor for Mean and Norm, extreme "
      "floor for Max and Min), relative errors, before floor_scale.");
  m.def("noise_floor_for",
        [](const std::string& dtype, bool is_tensor) { return std::string(gc::noise_floor_for(dtype, is_tensor).name); },
        py::arg("dtype"), py::arg("is_tensor") = true, "The noise-floor table row a dtype (as dumps write it) uses.");
  m.def(
      "csv_header",
      [](bool tensor_columns, const std::string& tensor_layout) {
        return gc::csv_header(tensor_columns, gcp::parse_layout(tensor_layout));
      },
      py::arg("tensor_columns") = false, py::arg("tensor_layout") = "msprobe",
      "CSV columns: msprobe's statistics columns; for tensor dumps (tensor_columns) msprobe's real-data columns "
      "(tensor_layout 'msprobe') or the statistics columns with the real-data ones appended ('graphprobe'); then "
      "graphprobe's.");
}
