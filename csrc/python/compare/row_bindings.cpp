// Row: one compare row (one tensor) as Python reads it.
#include <pybind11/stl.h>

#include <string>
#include <tuple>

#include "compare/first_divergence.h"
#include "python/compare/bindings.h"

namespace graphprobe::compare::python {
namespace {

// (Max, Min, Mean, Norm), None where a side has no number.
using StatTuple = std::tuple<std::optional<double>, std::optional<double>, std::optional<double>, std::optional<double>>;
StatTuple stat_tuple(const StatArray& a) { return {a[0], a[1], a[2], a[3]}; }

// The tensor metrics in TensorMetric order (kTensorMetricNames).
using MetricTuple = std::tuple<std::optional<double>, std::optional<double>, std::optional<double>,
                               std::optional<double>, std::optional<double>, std::optional<double>>;
static_assert(std::tuple_size_v<MetricTuple> == kNumTensorMetrics);

const char* status_name(TensorStatus s) {
  switch (s) {
    case TensorStatus::kNone: return "none";
    case TensorStatus::kComputed: return "computed";
    case TensorStatus::kMismatch: return "mismatch";
    case TensorStatus::kUnavailable: return "unavailable";
  }
  return "?";
}

template <typename F>
auto side(const TensorRecord* r, F f) -> std::optional<decltype(f(*r))> {
  if (!r) return std::nullopt;
  return f(*r);
}

}  // namespace

std::optional<std::string> non_empty(const std::string& s) {
  if (s.empty()) return std::nullopt;
  return s;
}

// The four statistics, then the Sketch (kStatSketch).
const char* const kStatNames[kNumStats + 1] = {"Max", "Min", "Mean", "Norm", "Sketch"};

// A RowError as Python sees it: per-statistic errors, z, the floor used.
py::dict row_error_dict(const RowError& e, double floor_scale) {
  py::dict d;
  d["errors"] = stat_tuple(e.e);
  d["z"] = e.z;
  d["worst_stat"] = e.worst_stat >= 0 ? py::object(py::str(kStatNames[e.worst_stat])) : py::object(py::none());
  d["floor_name"] = e.floor ? e.floor->name : "";
  d["floor_assumed"] = e.floor_assumed;
  d["floor_from_upstream"] = e.floor_from_upstream;
  d["floor_aggregate"] = e.floor ? e.floor->aggregate * floor_scale : 0.0;
  d["floor_extreme"] = e.floor ? e.floor->extreme * floor_scale : 0.0;
  d["floor_sketch"] = e.floor ? e.floor->sketch * floor_scale : 0.0;
  d["error_sketch"] = e.e_sketch ? py::object(py::float_(*e.e_sketch)) : py::object(py::none());
  d["produced_from_rms"] = e.produced_from_rms > 0 ? py::object(py::float_(e.produced_from_rms)) : py::object(py::none());
  std::optional<double> used;
  if (e.floor && e.worst_stat >= 0)
    used = (e.worst_stat == kStatSketch                               ? e.floor->sketch
            : e.worst_stat == kStatMax || e.worst_stat == kStatMin ? e.floor->extreme
                                                                    : e.floor->aggregate) *
           floor_scale;
  d["floor"] = used;
  d["hard"] = non_empty(e.hard);
  return d;
}

void bind_row(py::module_& m) {
  // Lives as long as the module: pybind11 keeps the pointer.
  static const std::string metrics_doc = [] {
    std::string doc = "(";
    for (int i = 0; i < kNumTensorMetrics; ++i) doc += std::string(i ? ", " : "") + kTensorMetricNames[i];
    return doc + "); None where not computed.";
  }();
  py::class_<RowView>(m, "Row", "One compare row (one tensor); stats are (Max, Min, Mean, Norm).")
      .def_property_readonly("index", [](const RowView& v) { return v.index; }, "Position in CompareResult.rows.")
      .def_property_readonly("name", [](const RowView& v) { return v.any().name; })
      .def_property_readonly("target_name", [](const RowView& v) { return side(v.target(), [](auto& r) { return r.name; }); })
      .def_property_readonly("bench_name", [](const RowView& v) { return side(v.bench(), [](auto& r) { return r.name; }); })
      .def_property_readonly("entry", [](const RowView& v) { return v.any_dump().entries[v.any().entry]; })
      .def_property_readonly("entry_index",
                             [](const RowView& v) { return v.target() ? static_cast<int64_t>(v.target()->entry) : -1; },
                             "Position of the target entry in execution order; -1 for bench-only rows.")
      .def_property_readonly("role", [](const RowView& v) { return v.any().role == Role::kInput ? "input" : "output"; })
      .def_property_readonly("match", [](const RowView& v) { return match_name(v.row().match); })
      .def_property_readonly("result", [](const RowView& v) { return verdict_name(v.row().verdict); })
      .def_property_readonly("reasons", [](const RowView& v) { return *v.row().reasons; })
      .def_property_readonly("first_divergence", [](const RowView& v) { return v.row().first_divergence; })
      .def_property_readonly("z", [](const RowView& v) -> std::optional<double> { return v.row().z; },
                             "Matched rows: largest scale-aware error / noise floor (> 1: beyond rounding noise; "
                             "inf: a hard difference); None otherwise.")
      .def_property_readonly("error",
                             [](const RowView& v) -> py::object {
                               if (v.row().match != MatchKind::kMatched) return py::none();
                               return row_error_dict(row_error_of(*v.result, v.index), v.result->floor_scale);
                             },
                             "Matched rows: the first-divergence error as a dict (errors per statistic (Max, Min, "
                             "Mean, Norm), error_sketch (the Sketch's estimate of the relative L2 error, or None), z, worst_stat "
                             "(Max, Min, Mean, Norm or Sketch), floor_name, floor, floor_aggregate, floor_extreme, "
                             "floor_sketch, produced_from_rms (the RMS the errors were measured against when a "
                             "cancellation made the record smaller than what produced it, else None), "
                             "floor_from_upstream (measured against the coarser floor of the data upstream), hard); None "
                             "otherwise.")
      .def_property_readonly("target_dtype", [](const RowView& v) { return side(v.target(), [](auto& r) { return r.dtype; }); })
      .def_property_readonly("bench_dtype", [](const RowView& v) { return side(v.bench(), [](auto& r) { return r.dtype; }); })
      .def_property_readonly("target_shape", [](const RowView& v) { return side(v.target(), [](auto& r) { return r.shape.to_vector(); }); })
      .def_property_readonly("bench_shape", [](const RowView& v) { return side(v.bench(), [](auto& r) { return r.shape.to_vector(); }); })
      .def_property_readonly("target_stats", [](const RowView& v) { return side(v.target(), [](auto& r) { return stat_tuple(r.stats); }); })
      .def_property_readonly("bench_stats", [](const RowView& v) { return side(v.bench(), [](auto& r) { return stat_tuple(r.stats); }); })
      .def_property_readonly("diff", [](const RowView& v) { return stat_tuple(v.row().metrics.diff); }, "target - bench")
      .def_property_readonly("rel_err_pct", [](const RowView& v) { return stat_tuple(v.row().metrics.rel_pct); })
      .def_property_readonly("norm_rel_err_pct",
                             [](const RowView& v) -> std::optional<double> { return v.row().metrics.rel_pct[kStatNorm]; })
      .def_property_readonly("target_data_name",
                             [](const RowView& v) { return v.target() ? non_empty(v.target()->data_name) : std::nullopt; },
                             "Tensor dumps: the target's file name under dump_tensor_data/, or None.")
      .def_property_readonly("bench_data_name",
                             [](const RowView& v) { return v.bench() ? non_empty(v.bench()->data_name) : std::nullopt; })
      .def_property_readonly("tensor_status", [](const RowView& v) { return status_name(v.row().tensor->status); },
                             "none, computed, mismatch or unavailable.")
      .def_property_readonly("tensor_metrics",
                             [](const RowView& v) -> MetricTuple {
                               const auto& a = v.row().tensor->values;
                               return {a[0], a[1], a[2], a[3], a[4], a[5]};
                             },
                             metrics_doc.c_str())
      .def("__repr__", [](const RowView& v) {
        return "<Row " + std::string(v.any().name) + " " + verdict_name(v.row().verdict) + ">";
      });

}

}  // namespace graphprobe::compare::python
