// graphprobe._compare: the torch-free compare engine.
//
// The boundary is three types: CompareOptions in, CompareResult (shared with
// its Row views) out, DumpFormatError / DumpReadError for bad input. The
// engine runs without the GIL so that threads or a progress bar keep going.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <tuple>

#include "compare/csv_writer.h"
#include "compare/digest.h"
#include "compare/engine.h"
#include "fs/atomic_file.h"

namespace py = pybind11;
namespace gc = graphprobe::compare;

namespace {

using Result = std::shared_ptr<const gc::CompareResult>;
using Quad = std::tuple<std::optional<double>, std::optional<double>, std::optional<double>, std::optional<double>>;

Quad quad(const gc::StatArray& a) { return {a[0], a[1], a[2], a[3]}; }

// One CSV row, read-only; keeps its result alive.
struct RowView {
  Result result;
  size_t index;

  const gc::CompareRow& row() const { return result->rows[index]; }
  const gc::TensorRecord* target() const {
    return row().target >= 0 ? &result->target.rows[static_cast<size_t>(row().target)] : nullptr;
  }
  const gc::TensorRecord* bench() const {
    return row().bench >= 0 ? &result->bench.rows[static_cast<size_t>(row().bench)] : nullptr;
  }
  // The side that exists, the target when both do.
  const gc::TensorRecord& any() const { return target() ? *target() : *bench(); }
  const gc::Dump& any_dump() const { return target() ? result->target : result->bench; }
};

template <typename F>
auto side(const gc::TensorRecord* r, F f) -> std::optional<decltype(f(*r))> {
  if (!r) return std::nullopt;
  return f(*r);
}

}  // namespace

PYBIND11_MODULE(_compare, m) {
  m.doc() = "graphprobe compare engine (torch-free): dump.json pairs -> msprobe compare rows";

  py::register_exception<gc::DumpFormatError>(m, "DumpFormatError", PyExc_ValueError);
  py::register_exception<graphprobe::fs::IoError>(m, "DumpReadError", PyExc_OSError);

  py::class_<gc::CompareOptions>(m, "CompareOptions", "Matching mode and verdict thresholds (percentages).")
      .def(py::init([](bool fuzzy, double input_error_pct, double output_error_pct, double warning_ratio,
                       double warning_pct, double noise_pct) {
             gc::CompareOptions o;
             o.fuzzy = fuzzy;
             o.thresholds = {input_error_pct, output_error_pct, warning_ratio, warning_pct, noise_pct};
             return o;
           }),
           py::kw_only(), py::arg("fuzzy") = false, py::arg("input_error_pct") = 10.0,
           py::arg("output_error_pct") = 50.0, py::arg("warning_ratio") = 10.0, py::arg("warning_pct") = 10.0,
           py::arg("noise_pct") = 0.001)
      .def_readwrite("fuzzy", &gc::CompareOptions::fuzzy)
      .def_property_readonly("input_error_pct", [](const gc::CompareOptions& o) { return o.thresholds.input_error_pct; })
      .def_property_readonly("output_error_pct", [](const gc::CompareOptions& o) { return o.thresholds.output_error_pct; })
      .def_property_readonly("warning_ratio", [](const gc::CompareOptions& o) { return o.thresholds.warning_ratio; })
      .def_property_readonly("warning_pct", [](const gc::CompareOptions& o) { return o.thresholds.warning_pct; })
      .def_property_readonly("noise_pct", [](const gc::CompareOptions& o) { return o.thresholds.noise_pct; });

  py::class_<RowView>(m, "Row", "One compare row (one tensor); stats are (Max, Min, Mean, Norm).")
      .def_property_readonly("name", [](const RowView& v) { return v.any().name; })
      .def_property_readonly("target_name", [](const RowView& v) { return side(v.target(), [](auto& r) { return r.name; }); })
      .def_property_readonly("bench_name", [](const RowView& v) { return side(v.bench(), [](auto& r) { return r.name; }); })
      .def_property_readonly("entry", [](const RowView& v) { return v.any_dump().entries[v.any().entry]; })
      .def_property_readonly("entry_index",
                             [](const RowView& v) { return v.target() ? static_cast<int64_t>(v.target()->entry) : -1; },
                             "Position of the target entry in execution order; -1 for bench-only rows.")
      .def_property_readonly("role", [](const RowView& v) { return v.any().role == gc::Role::kInput ? "input" : "output"; })
      .def_property_readonly("match", [](const RowView& v) { return gc::match_name(v.row().match); })
      .def_property_readonly("result", [](const RowView& v) { return gc::verdict_name(v.row().verdict); })
      .def_property_readonly("reasons", [](const RowView& v) { return v.row().reasons; })
      .def_property_readonly("first_divergence", [](const RowView& v) { return v.row().first_divergence; })
      .def_property_readonly("target_dtype", [](const RowView& v) { return side(v.target(), [](auto& r) { return r.dtype; }); })
      .def_property_readonly("bench_dtype", [](const RowView& v) { return side(v.bench(), [](auto& r) { return r.dtype; }); })
      .def_property_readonly("target_shape", [](const RowView& v) { return side(v.target(), [](auto& r) { return r.shape; }); })
      .def_property_readonly("bench_shape", [](const RowView& v) { return side(v.bench(), [](auto& r) { return r.shape; }); })
      .def_property_readonly("target_stats", [](const RowView& v) { return side(v.target(), [](auto& r) { return quad(r.stats); }); })
      .def_property_readonly("bench_stats", [](const RowView& v) { return side(v.bench(), [](auto& r) { return quad(r.stats); }); })
      .def_property_readonly("diff", [](const RowView& v) { return quad(v.row().metrics.diff); }, "target - bench")
      .def_property_readonly("rel_err_pct", [](const RowView& v) { return quad(v.row().metrics.rel_pct); })
      .def_property_readonly("norm_rel_err_pct", [](const RowView& v) { return v.row().metrics.rel_pct[gc::kNorm]; })
      .def("__repr__", [](const RowView& v) {
        return "<Row " + v.any().name + " " + gc::verdict_name(v.row().verdict) + ">";
      });

  py::class_<gc::CompareResult, std::shared_ptr<gc::CompareResult>>(m, "CompareResult")
      .def_property_readonly("target_path", [](const gc::CompareResult& r) { return r.target.source; })
      .def_property_readonly("bench_path", [](const gc::CompareResult& r) { return r.bench.source; })
      .def_property_readonly("target_entries", [](const gc::CompareResult& r) { return r.target.entries; },
                             "Target entry names in execution order.")
      .def_property_readonly("rows",
                             [](const std::shared_ptr<gc::CompareResult>& r) {
                               py::list out;
                               for (size_t i = 0; i < r->rows.size(); ++i) out.append(RowView{r, i});
                               return out;
                             })
      .def_property_readonly("counts",
                             [](const gc::CompareResult& r) {
                               py::dict d;
                               for (int v = 0; v < gc::kNumVerdicts; ++v)
                                 d[gc::verdict_name(static_cast<gc::Verdict>(v))] = r.counts[static_cast<size_t>(v)];
                               return d;
                             },
                             "Rows per Result: pass, warning, error, unmatched.")
      .def_property_readonly("first_divergence",
                             [](const gc::CompareResult& r) -> std::optional<std::string> {
                               if (!r.first_divergence) return std::nullopt;
                               return r.target.entries[*r.first_divergence];
                             },
                             "Entry name of the first divergence, or None.")
      .def_property_readonly("first_divergence_index",
                             [](const gc::CompareResult& r) -> std::optional<uint32_t> { return r.first_divergence; })
      .def("entry_summaries",
           [](const gc::CompareResult& r) {
             std::vector<std::tuple<std::optional<double>, const char*, bool>> out;
             for (const auto& e : gc::entry_summaries(r))
               out.emplace_back(e.norm_rel_pct, gc::verdict_name(e.verdict), e.first_divergence);
             return out;
           },
           "Per target entry, in execution order: (largest output NormRelativeErr or None, worst Result, "
           "is first divergence).")
      .def("worst_rows",
           [](const std::shared_ptr<gc::CompareResult>& r, size_t n) {
             py::list out;
             for (size_t i : gc::worst_rows(*r, n)) out.append(RowView{r, i});
             return out;
           },
           py::arg("n"), "The n worst matched rows: by Result, then NormRelativeErr (NaN first).")
      .def("__len__", [](const gc::CompareResult& r) { return r.rows.size(); })
      .def("render_csv", &gc::render_csv, "The CSV text.")
      .def("write_csv", &gc::write_csv, py::arg("path"), py::call_guard<py::gil_scoped_release>(),
           "Writes the CSV atomically (temporary file + rename).");

  m.def(
      "compare_files",
      [](const std::string& target, const std::string& bench, const gc::CompareOptions& options) {
        return std::make_shared<gc::CompareResult>(gc::compare_files(target, bench, options));
      },
      py::arg("target_path"), py::arg("bench_path"), py::arg("options") = gc::CompareOptions{},
      py::call_guard<py::gil_scoped_release>(),
      "Compares two dump.json files. Raises DumpFormatError (a ValueError) for malformed files and "
      "DumpReadError (an OSError) for unreadable ones.");
  m.def("csv_header", &gc::csv_header, "CSV columns: msprobe's, then graphprobe's.");
}
