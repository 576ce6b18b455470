// graphprobe._compare: the torch-free compare engine.
//
// The boundary is three types: CompareOptions in, CompareResult (shared with
// its Row views) out, DumpFormatError / DumpReadError for bad input. The
// engine runs without the GIL so that threads or a progress bar keep going.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <memory>
#include <optional>
#include <stdexcept>
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

using Six = std::tuple<std::optional<double>, std::optional<double>, std::optional<double>, std::optional<double>,
                       std::optional<double>, std::optional<double>>;

const char* status_name(gc::TensorStatus s) {
  switch (s) {
    case gc::TensorStatus::kNone: return "none";
    case gc::TensorStatus::kComputed: return "computed";
    case gc::TensorStatus::kMismatch: return "mismatch";
    case gc::TensorStatus::kUnavailable: return "unavailable";
  }
  return "?";
}

gc::TensorStatus parse_status(const std::string& s) {
  if (s == "computed") return gc::TensorStatus::kComputed;
  if (s == "mismatch") return gc::TensorStatus::kMismatch;
  if (s == "unavailable") return gc::TensorStatus::kUnavailable;
  throw std::invalid_argument("set_tensor_metrics: status must be 'computed', 'mismatch' or 'unavailable', got '" +
                              s + "'");
}

const char* layout_name(gc::TensorLayout l) {
  return l == gc::TensorLayout::kMsprobe ? "msprobe" : "graphprobe";
}

gc::TensorLayout parse_layout(const std::string& s) {
  if (s == "msprobe") return gc::TensorLayout::kMsprobe;
  if (s == "graphprobe") return gc::TensorLayout::kStatisticsPlusTensor;
  throw std::invalid_argument("tensor_layout must be 'msprobe' or 'graphprobe', got '" + s + "'");
}

std::optional<std::string> non_empty(const std::string& s) {
  if (s.empty()) return std::nullopt;
  return s;
}

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
  // Local: _C maps the same C++ type (fs::IoError) to its own class, and a
  // global registration here would take over the engine's errors.
  py::register_local_exception<graphprobe::fs::IoError>(m, "DumpReadError", PyExc_OSError);

  py::class_<gc::CompareOptions>(m, "CompareOptions", "Matching mode and verdict thresholds (percentages).")
      .def(py::init([](bool fuzzy, double input_error_pct, double output_error_pct, double warning_ratio,
                       double warning_pct, double noise_pct, double cosine_input_min, double cosine_drop,
                       double thousandth_input_min, double thousandth_output_max, bool graphprobe_verdicts,
                       const std::string& tensor_layout) {
             gc::CompareOptions o;
             o.fuzzy = fuzzy;
             o.graphprobe_verdicts = graphprobe_verdicts;
             o.tensor_layout = parse_layout(tensor_layout);
             o.thresholds = {input_error_pct, output_error_pct,    warning_ratio,        warning_pct,
                             noise_pct,       cosine_input_min,    cosine_drop,          thousandth_input_min,
                             thousandth_output_max};
             return o;
           }),
           py::kw_only(), py::arg("fuzzy") = false, py::arg("input_error_pct") = 10.0,
           py::arg("output_error_pct") = 50.0, py::arg("warning_ratio") = 10.0, py::arg("warning_pct") = 10.0,
           py::arg("noise_pct") = 0.001, py::arg("cosine_input_min") = 0.9, py::arg("cosine_drop") = 0.1,
           py::arg("thousandth_input_min") = 0.9, py::arg("thousandth_output_max") = 0.1,
           py::arg("graphprobe_verdicts") = false, py::arg("tensor_layout") = "msprobe")
      .def_readwrite("fuzzy", &gc::CompareOptions::fuzzy)
      .def_property_readonly("tensor_layout", [](const gc::CompareOptions& o) { return layout_name(o.tensor_layout); },
                             "Tensor dumps: 'msprobe' (its real-data CSV and rules) or 'graphprobe' (the statistics "
                             "CSV and rules plus the tensor columns and graphprobe's tensor rules).")
      .def_readwrite("graphprobe_verdicts", &gc::CompareOptions::graphprobe_verdicts,
                     "Result follows graphprobe's additions (unmatched, noise floor), not only msprobe's rules.")
      .def_property_readonly("input_error_pct", [](const gc::CompareOptions& o) { return o.thresholds.input_error_pct; })
      .def_property_readonly("output_error_pct", [](const gc::CompareOptions& o) { return o.thresholds.output_error_pct; })
      .def_property_readonly("warning_ratio", [](const gc::CompareOptions& o) { return o.thresholds.warning_ratio; })
      .def_property_readonly("warning_pct", [](const gc::CompareOptions& o) { return o.thresholds.warning_pct; })
      .def_property_readonly("noise_pct", [](const gc::CompareOptions& o) { return o.thresholds.noise_pct; })
      .def_property_readonly("cosine_input_min", [](const gc::CompareOptions& o) { return o.thresholds.cosine_input_min; })
      .def_property_readonly("cosine_drop", [](const gc::CompareOptions& o) { return o.thresholds.cosine_drop; })
      .def_property_readonly("thousandth_input_min",
                             [](const gc::CompareOptions& o) { return o.thresholds.thousandth_input_min; })
      .def_property_readonly("thousandth_output_max",
                             [](const gc::CompareOptions& o) { return o.thresholds.thousandth_output_max; });

  py::class_<RowView>(m, "Row", "One compare row (one tensor); stats are (Max, Min, Mean, Norm).")
      .def_property_readonly("index", [](const RowView& v) { return v.index; }, "Position in CompareResult.rows.")
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
      .def_property_readonly("norm_rel_err_pct",
                             [](const RowView& v) -> std::optional<double> { return v.row().metrics.rel_pct[gc::kNorm]; })
      .def_property_readonly("target_data_name",
                             [](const RowView& v) { return v.target() ? non_empty(v.target()->data_name) : std::nullopt; },
                             "Tensor dumps: the target's file name under dump_tensor_data/, or None.")
      .def_property_readonly("bench_data_name",
                             [](const RowView& v) { return v.bench() ? non_empty(v.bench()->data_name) : std::nullopt; })
      .def_property_readonly("tensor_status", [](const RowView& v) { return status_name(v.row().tensor.status); },
                             "none, computed, mismatch or unavailable.")
      .def_property_readonly("tensor_metrics",
                             [](const RowView& v) -> Six {
                               const auto& a = v.row().tensor.values;
                               return {a[0], a[1], a[2], a[3], a[4], a[5]};
                             },
                             "(Cosine, EucDist, MaxAbsErr, MaxRelativeErr, One Thousandth Err Ratio, "
                             "Five Thousandths Err Ratio); None where not computed.")
      .def("__repr__", [](const RowView& v) {
        return "<Row " + v.any().name + " " + gc::verdict_name(v.row().verdict) + ">";
      });

  py::class_<gc::CompareResult, std::shared_ptr<gc::CompareResult>>(m, "CompareResult")
      .def_property_readonly("target_path", [](const gc::CompareResult& r) { return r.target.source; })
      .def_property_readonly("bench_path", [](const gc::CompareResult& r) { return r.bench.source; })
      .def_property_readonly("target_entries", [](const gc::CompareResult& r) { return r.target.entries; },
                             "Target entry names in execution order.")
      .def_property_readonly("notes",
                             [](const gc::CompareResult& r) {
                               std::vector<std::string> out = r.target.notes;
                               out.insert(out.end(), r.bench.notes.begin(), r.bench.notes.end());
                               return out;
                             },
                             "What reading the dumps decided that the user should hear about (duplicate keys).")
      .def_property_readonly("target_task", [](const gc::CompareResult& r) { return r.target.task; })
      .def_property_readonly("bench_task", [](const gc::CompareResult& r) { return r.bench.task; })
      .def_property_readonly("has_tensor_data", &gc::has_tensor_data,
                             "Both dumps' tensor records carry data_name (tensor dumps).")
      .def_property_readonly("tensor_mode", [](const gc::CompareResult& r) { return r.tensor_mode; },
                             "finish_tensor_compare has run: the CSV has the tensor columns.")
      .def(
          "set_tensor_metrics",
          [](gc::CompareResult& r, size_t index, const std::string& status, const py::tuple& values,
             std::vector<std::string> notes) {
            if (r.tensor_mode) throw std::logic_error("set_tensor_metrics: finish_tensor_compare has already run");
            if (index >= r.rows.size())
              throw py::index_error("set_tensor_metrics: row " + std::to_string(index) + " out of range (" +
                                    std::to_string(r.rows.size()) + " rows)");
            gc::CompareRow& row = r.rows[index];
            if (row.match != gc::MatchKind::kMatched)
              throw std::invalid_argument("set_tensor_metrics: row " + std::to_string(index) + " is not matched");
            row.tensor.status = parse_status(status);
            if (values.size() != gc::kNumTensorMetrics)
              throw std::invalid_argument("set_tensor_metrics: values must hold 6 items, got " +
                                          std::to_string(values.size()));
            for (size_t i = 0; i < values.size(); ++i) {
              const py::handle v = values[i];
              row.tensor.values[i] = std::nullopt;
              row.tensor.words[i] = gc::CellWord::kNone;
              if (v.is_none()) continue;
              if (py::isinstance<py::str>(v)) row.tensor.words[i] = gc::parse_word(v.cast<std::string>());
              else row.tensor.values[i] = v.cast<double>();
            }
            if (row.tensor.status != gc::TensorStatus::kComputed) row.tensor.values = {};
            row.tensor.notes = std::move(notes);
          },
          py::arg("index"), py::arg("status"), py::arg("values"), py::arg("notes"),
          "Stores a matched row's tensor metrics (order of Row.tensor_metrics: each a float, None, or msprobe's "
          "word for the cell, such as 'unsupported'). status: 'computed', 'mismatch' "
          "(dtype/shape differ; Result error) or 'unavailable' (a file missing or unreadable; Result warning); "
          "notes go to Err_message.")
      .def("finish_tensor_compare", &gc::finish_tensor_compare, py::arg("options"),
           "Applies the tensor rules, finds the first divergence again, recounts; the CSV then has the tensor "
           "columns. Once per result.")
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
      .def("entry_points",
           [](const gc::CompareResult& r, const py::object& make) {
             // One object per entry made here, with the verdict strings made
             // once: no intermediate lists of names and tuples (a large
             // compare's digest would hold them next to the records).
             std::array<py::str, gc::kNumVerdicts> verdicts;
             for (int v = 0; v < gc::kNumVerdicts; ++v) verdicts[v] = py::str(gc::verdict_name(static_cast<gc::Verdict>(v)));
             const auto summaries = gc::entry_summaries(r);
             py::list out(summaries.size());
             for (size_t i = 0; i < summaries.size(); ++i) {
               const auto& e = summaries[i];
               py::object value = e.norm_rel_pct ? py::object(py::float_(*e.norm_rel_pct)) : py::object(py::none());
               out[i] = make(i, r.target.entries[i], value, verdicts[static_cast<size_t>(e.verdict)], e.first_divergence);
             }
             return out;
           },
           py::arg("make"),
           "make(index, entry, largest output NormRelativeErr or None, worst Result, is first divergence) for each "
           "target entry, in execution order; the list of what it returns.")
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
  m.def(
      "csv_header",
      [](bool tensor_columns, const std::string& tensor_layout) {
        return gc::csv_header(tensor_columns, parse_layout(tensor_layout));
      },
      py::arg("tensor_columns") = false, py::arg("tensor_layout") = "msprobe",
      "CSV columns: msprobe's statistics columns; for tensor dumps (tensor_columns) msprobe's real-data columns "
      "(tensor_layout 'msprobe') or the statistics columns with the real-data ones appended ('graphprobe'); then "
      "graphprobe's.");
}
