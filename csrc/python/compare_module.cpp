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
#include "compare/first_divergence.h"
#include "compare/noise_floor.h"
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

const char* kStatNames[gc::kNumStats] = {"Max", "Min", "Mean", "Norm"};

// A RowError as Python sees it: per-statistic errors, z, the floor used.
py::dict row_error_dict(const gc::RowError& e, double floor_scale) {
  py::dict d;
  d["errors"] = quad(e.e);
  d["z"] = e.z;
  d["worst_stat"] = e.worst_stat >= 0 ? py::object(py::str(kStatNames[e.worst_stat])) : py::object(py::none());
  d["floor_name"] = e.floor ? e.floor->name : "";
  d["floor_assumed"] = e.floor_assumed;
  d["floor_from_upstream"] = e.floor_from_upstream;
  d["floor_aggregate"] = e.floor ? e.floor->aggregate * floor_scale : 0.0;
  d["floor_extreme"] = e.floor ? e.floor->extreme * floor_scale : 0.0;
  std::optional<double> used;
  if (e.floor && e.worst_stat >= 0)
    used = (e.worst_stat == gc::kMax || e.worst_stat == gc::kMin ? e.floor->extreme : e.floor->aggregate) * floor_scale;
  d["floor"] = used;
  d["hard"] = non_empty(e.hard);
  return d;
}

py::list kind_names(uint8_t kinds) {
  py::list out;
  if (kinds & gc::kParameterCause) out.append("parameter");
  if (kinds & gc::kOutputCause) out.append("output");
  if (kinds & gc::kUnrecordedInput) out.append("unrecorded-input");
  return out;
}

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
                       const std::string& tensor_layout, double floor_scale, double divergence_ratio) {
             gc::CompareOptions o;
             o.fuzzy = fuzzy;
             o.graphprobe_verdicts = graphprobe_verdicts;
             o.tensor_layout = parse_layout(tensor_layout);
             o.thresholds = {input_error_pct, output_error_pct,    warning_ratio,        warning_pct,
                             noise_pct,       cosine_input_min,    cosine_drop,          thousandth_input_min,
                             thousandth_output_max, floor_scale,       divergence_ratio};
             return o;
           }),
           py::kw_only(), py::arg("fuzzy") = false, py::arg("input_error_pct") = 10.0,
           py::arg("output_error_pct") = 50.0, py::arg("warning_ratio") = 10.0, py::arg("warning_pct") = 10.0,
           py::arg("noise_pct") = 0.001, py::arg("cosine_input_min") = 0.9, py::arg("cosine_drop") = 0.1,
           py::arg("thousandth_input_min") = 0.9, py::arg("thousandth_output_max") = 0.1,
           py::arg("graphprobe_verdicts") = false, py::arg("tensor_layout") = "msprobe",
           py::arg("floor_scale") = 1.0, py::arg("divergence_ratio") = 4.0)
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
                             [](const gc::CompareOptions& o) { return o.thresholds.thousandth_output_max; })
      .def_property_readonly("floor_scale", [](const gc::CompareOptions& o) { return o.thresholds.floor_scale; },
                             "Multiplies every noise floor of the first-divergence rule.")
      .def_property_readonly("divergence_ratio", [](const gc::CompareOptions& o) { return o.thresholds.divergence_ratio; },
                             "R of the first-divergence rule.");

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
      .def_property_readonly("z", [](const RowView& v) -> std::optional<double> { return v.row().z; },
                             "Matched rows: largest scale-aware error / noise floor (> 1: beyond rounding noise; "
                             "inf: a hard difference); None otherwise.")
      .def_property_readonly("error",
                             [](const RowView& v) -> py::object {
                               if (v.row().match != gc::MatchKind::kMatched) return py::none();
                               return row_error_dict(gc::row_error_of(*v.result, v.index), v.result->floor_scale);
                             },
                             "Matched rows: the first-divergence error as a dict (errors per statistic (Max, Min, "
                             "Mean, Norm), z, worst_stat, floor_name, floor, floor_aggregate, floor_extreme, "
                             "floor_from_upstream (measured against the coarser floor of the data upstream), hard); None "
                             "otherwise.")
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
      .def_property_readonly(
          "divergence",
          [](const std::shared_ptr<gc::CompareResult>& r) -> py::object {
            if (!r->divergence) return py::none();
            const gc::Divergence& d = *r->divergence;
            py::dict out;
            out["entry"] = r->target.entries[d.entry];
            out["entry_index"] = d.entry;
            out["kinds"] = kind_names(d.kinds);
            const gc::CompareRow& row = r->rows[d.row];
            out["row"] = r->target.rows[static_cast<size_t>(row.target)].name;
            out["row_index"] = d.row;
            out["error"] = row_error_dict(d.error, r->floor_scale);
            out["z_inputs"] = d.z_inputs;
            out["z_parameters"] = d.z_parameters;
            out["z_outputs"] = d.z_outputs;
            out["last_agreeing"] = d.last_agreeing ? py::object(py::str(r->target.entries[*d.last_agreeing]))
                                                   : py::object(py::none());
            py::list between;
            for (uint32_t e : d.unmatched_between) between.append(r->target.entries[e]);
            out["unmatched_between"] = between;
            out["parameter_rows"] = d.parameter_rows;
            out["parameter_rows_differing"] = d.parameter_rows_differing;
            out["parameters_throughout"] = d.parameters_throughout;
            out["message"] = d.message;
            return out;
          },
          "The first divergence, or None: entry, entry_index, kinds (of 'parameter', 'output', "
          "'unrecorded-input'), row (the name of the row that triggered), row_index, error (that row's, as "
          "Row.error), z_inputs / z_parameters / z_outputs (largest z of the entry's rows of each role), "
          "last_agreeing and unmatched_between (kind unrecorded-input), parameter_rows, "
          "parameter_rows_differing, parameters_throughout, message.")
      .def_property_readonly(
          "noise",
          [](const gc::CompareResult& r) {
            py::dict d;
            d["max_e"] = r.noise.max_e;
            d["max_z"] = r.noise.max_z;
            d["rows"] = r.noise.rows;
            d["upstream"] = r.noise.upstream;
            return d;
          },
          "The noise where the pair agrees: largest per-statistic error (max_e) and z (max_z) over the matched rows "
          "before the first divergence (upstream True), or over every matched row when there is none.")
      .def_property_readonly(
          "coverage",
          [](const gc::CompareResult& r) {
            const gc::Coverage& c = r.coverage;
            py::dict d;
            d["target_entries"] = c.target_entries;
            d["bench_entries"] = c.bench_entries;
            d["target_rows"] = c.target_rows;
            d["bench_rows"] = c.bench_rows;
            d["matched_rows"] = c.matched_rows;
            d["problem"] = non_empty(c.problem);
            return d;
          },
          "Entries and rows of each side, matched rows, and problem: why a side counts as empty or short, or None.")
      .def_property_readonly(
          "floors_used",
          [](const gc::CompareResult& r) {
            std::vector<std::tuple<std::string, double, double>> out;
            for (const auto& f : r.floors_used) out.emplace_back(f.name, f.aggregate, f.extreme);
            return out;
          },
          "(table row, aggregate floor, extreme floor) for each row of the noise-floor table the matched rows used, "
          "floor_scale applied.")
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
        return gc::csv_header(tensor_columns, parse_layout(tensor_layout));
      },
      py::arg("tensor_columns") = false, py::arg("tensor_layout") = "msprobe",
      "CSV columns: msprobe's statistics columns; for tensor dumps (tensor_columns) msprobe's real-data columns "
      "(tensor_layout 'msprobe') or the statistics columns with the real-data ones appended ('graphprobe'); then "
      "graphprobe's.");
}
