// CompareResult: the rows, counts, first divergence, noise and coverage of
// one comparison, and the tensor-mode hooks graphprobe.compare.tensors fills.
#include <pybind11/stl.h>

#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>

#include "compare/csv_writer.h"
#include "compare/digest.h"
#include "compare/comparison.h"
#include "compare/first_divergence.h"
#include "python/compare/bindings.h"

namespace graphprobe::compare::python {
namespace {

TensorStatus parse_status(const std::string& s) {
  if (s == "computed") return TensorStatus::kComputed;
  if (s == "mismatch") return TensorStatus::kMismatch;
  if (s == "unavailable") return TensorStatus::kUnavailable;
  throw std::invalid_argument("set_tensor_metrics: status must be 'computed', 'mismatch' or 'unavailable', got '" +
                              s + "'");
}

py::list kind_names(uint8_t kinds) {
  py::list out;
  if (kinds & kParameterCause) out.append("parameter");
  if (kinds & kOutputCause) out.append("output");
  if (kinds & kUnrecordedInput) out.append("unrecorded-input");
  if (kinds & kIntegerOutput) out.append("integer-output");
  if (kinds & kBitwisePair) out.append("bitwise-pair");
  if (kinds & kSameValues) out.append("same-values");
  if (kinds & kRandom) out.append("random");
  return out;
}

// What the report's worst-rows table reads of each row (outcome.RowDigest),
// one tuple per row: eight RowView property calls a row were most of
// listing the HTML page's 5,000 rows.
py::list row_digests(const std::shared_ptr<CompareResult>& r, const std::vector<size_t>& indices) {
  using Opt = std::optional<double>;
  const auto norm = [](const TensorRecord* rec) { return rec ? Opt(rec->stats[kStatNorm]) : Opt(); };
  py::list out;
  for (size_t i : indices) {
    if (i >= r->rows.size()) throw py::index_error("row_digests: row " + std::to_string(i) + " of " +
                                                   std::to_string(r->rows.size()));
    const RowView v{r, i};
    const CompareRow& row = v.row();
    const TensorRecord& any = v.any();
    const auto& tm = row.tensor->values;
    out.append(py::make_tuple(any.name, v.any_dump().entries[any.entry], any.role == Role::kInput ? "input" : "output",
                              verdict_name(row.verdict), Opt(row.metrics.rel_pct[kStatNorm]), norm(v.target()),
                              norm(v.bench()), py::tuple(py::cast(*row.reasons)), Opt(tm[kCosine]),
                              Opt(tm[kMaxAbsErr])));
  }
  return out;
}

}  // namespace

void bind_result(py::module_& m) {
  py::class_<CompareResult, std::shared_ptr<CompareResult>>(m, "CompareResult")
      .def_property_readonly("target_path", [](const CompareResult& r) { return r.target.source; })
      .def_property_readonly("bench_path", [](const CompareResult& r) { return r.bench.source; })
      .def_property_readonly("target_entries", [](const CompareResult& r) { return r.target.entries; },
                             "Target entry names in execution order.")
      .def_property_readonly("notes",
                             [](const CompareResult& r) {
                               std::vector<std::string> out = r.target.notes;
                               out.insert(out.end(), r.bench.notes.begin(), r.bench.notes.end());
                               return out;
                             },
                             "What reading the dumps decided that the user should hear about (duplicate keys).")
      .def_property_readonly("target_task", [](const CompareResult& r) { return r.target.task; })
      .def_property_readonly("bench_task", [](const CompareResult& r) { return r.bench.task; })
      .def_property_readonly("has_tensor_data", &has_tensor_data,
                             "Both dumps' tensor records carry data_name (tensor dumps).")
      .def_property_readonly("tensor_mode", [](const CompareResult& r) { return r.tensor_mode; },
                             "finish_tensor_compare has run: the CSV has the tensor columns.")
      .def(
          "set_tensor_metrics",
          [](CompareResult& r, size_t index, const std::string& status, const py::tuple& values,
             std::vector<std::string> notes) {
            if (r.tensor_mode) throw std::logic_error("set_tensor_metrics: finish_tensor_compare has already run");
            if (index >= r.rows.size())
              throw py::index_error("set_tensor_metrics: row " + std::to_string(index) + " out of range (" +
                                    std::to_string(r.rows.size()) + " rows)");
            CompareRow& row = r.rows[index];
            if (row.match != MatchKind::kMatched)
              throw std::invalid_argument("set_tensor_metrics: row " + std::to_string(index) + " is not matched");
            TensorMetrics& tensor = row.tensor.mut();
            tensor.status = parse_status(status);
            if (values.size() != kNumTensorMetrics)
              throw std::invalid_argument("set_tensor_metrics: values must hold 6 items, got " +
                                          std::to_string(values.size()));
            for (size_t i = 0; i < values.size(); ++i) {
              const py::handle v = values[i];
              tensor.values[i] = std::nullopt;
              tensor.words[i] = CellWord::kNone;
              if (v.is_none()) continue;
              if (py::isinstance<py::str>(v)) tensor.words[i] = parse_word(v.cast<std::string>());
              else tensor.values[i] = v.cast<double>();
            }
            if (tensor.status != TensorStatus::kComputed) tensor.values = {};
            tensor.notes = std::move(notes);
          },
          py::arg("index"), py::arg("status"), py::arg("values"), py::arg("notes"),
          "Stores a matched row's tensor metrics (order of Row.tensor_metrics: each a float, None, or msprobe's "
          "word for the cell, such as 'unsupported'). status: 'computed', 'mismatch' "
          "(dtype/shape differ; Result error) or 'unavailable' (a file missing or unreadable; Result warning); "
          "notes go to Err_message.")
      .def("finish_tensor_compare", &finish_tensor_compare, py::arg("options"),
           "Applies the tensor rules, finds the first divergence again, recounts; the CSV then has the tensor "
           "columns. Once per result.")
      .def_property_readonly("rows",
                             [](const std::shared_ptr<CompareResult>& r) {
                               py::list out;
                               for (size_t i = 0; i < r->rows.size(); ++i) out.append(RowView{r, i});
                               return out;
                             })
      .def(
          "unmatched_rows",
          [](const CompareResult& r, bool both_sides) {
            // Only the rows without a partner cross into Python: a view of
            // every row (rows) cost a second and ~80 MB at 2 x 100 MB for
            // the few that the summary's same-name scan wants.
            const auto side_of = [&r](const CompareRow& row) -> const TensorRecord* {
              if (row.match == MatchKind::kTargetOnly) return &r.target.rows[static_cast<size_t>(row.target)];
              if (row.match == MatchKind::kBenchOnly) return &r.bench.rows[static_cast<size_t>(row.bench)];
              return nullptr;
            };
            // both_sides: only names that an unmatched row of the other side
            // holds too, what the same-name scan keeps (a dump pair with tens
            // of thousands of unmatched rows made a tuple of each for it).
            std::unordered_set<std::string_view> names[2];
            if (both_sides)
              for (const CompareRow& row : r.rows)
                if (const TensorRecord* rec = side_of(row)) names[row.match == MatchKind::kBenchOnly].insert(rec->name);
            std::vector<std::tuple<const char*, std::string, std::string>> out;
            for (const CompareRow& row : r.rows) {
              const TensorRecord* rec = side_of(row);
              if (rec == nullptr) continue;
              if (both_sides && !names[row.match != MatchKind::kBenchOnly].count(rec->name)) continue;
              out.emplace_back(match_name(row.match), rec->name, rec->dtype);
            }
            return out;
          },
          py::arg("both_sides") = false,
          "(match, name, dtype) of each row without a partner, in row order: match is 'unmatched-target' or "
          "'unmatched-bench', name and dtype are that side's record's. both_sides: only the rows whose name an "
          "unmatched row of the other side holds too.")
      .def_property_readonly("counts",
                             [](const CompareResult& r) {
                               py::dict d;
                               for (int v = 0; v < kNumVerdicts; ++v)
                                 d[verdict_name(static_cast<Verdict>(v))] = r.counts[static_cast<size_t>(v)];
                               return d;
                             },
                             "Rows per Result: pass, warning, error, unmatched.")
      .def_property_readonly("parameters_after_update", [](const CompareResult& r) { return r.parameters_after_update; },
                             "True when parameters were judged as the first training step's update (step 1, a "
                             "dump with a backward pass): explaining, never a first divergence.")
      .def_property_readonly("parameter_rows_carried", [](const CompareResult& r) { return r.parameter_rows_carried; },
                             "Parameter rows beyond their floor judged as carried from the step before "
                             "(CompareOptions.carried_parameters).")
      .def_property_readonly("differing_parameters", [](const CompareResult& r) { return r.differing_parameters; },
                             "The parameters ('{module path}.{name}') whose parameter row or gradient record is "
                             "beyond its floor: the next step's carried_parameters.")
      .def_property_readonly(
          "parameter_basis",
          [](const CompareResult& r) { return basis_tuples(r.parameter_basis); },
          "A training step's parameters for the step after it: (key, the bench's Sketch of the parameter, its "
          "gradients' relative error by their Sketch), sorted by key (CompareOptions.update_basis).")
      .def_property_readonly("update_rows",
                             [](const CompareResult& r) {
                               return std::make_pair(r.update_rows_beyond, r.update_rows_judged);
                             },
                             "(beyond, judged): parameter rows the first update's rule judged, and those further "
                             "apart than their gradients' rounding at step 0 explains.")
      .def_property_readonly("parameter_rows", [](const CompareResult& r) { return r.parameter_rows; },
                             "Parameter rows compared.")
      .def_property_readonly("parameter_rows_differing",
                             [](const CompareResult& r) { return r.parameter_rows_differing; },
                             "Parameter rows beyond their floor on Max, Min, Mean or Norm.")
      .def_property_readonly("arguments_without_effect",
                             [](const CompareResult& r) { return r.arguments_without_effect; },
                             "Non-tensor arguments that differ in a call whose outputs are no further apart than "
                             "rounding and their inputs explain, each as 'ENTRY NAME: TARGET vs BENCH': not a "
                             "divergence.")
      .def_property_readonly("errors_within_noise", [](const CompareResult& r) { return r.errors_within_noise; },
                             "Rows counted under Result error by msprobe's relative-error rule alone, in a pair "
                             "whose every row the first-divergence rule found within rounding noise (a "
                             "cancellation residue): --fail-on error does not fail on them.")
      .def_property_readonly("first_divergence",
                             [](const CompareResult& r) -> std::optional<std::string> {
                               if (!r.first_divergence) return std::nullopt;
                               return r.target.entries[*r.first_divergence];
                             },
                             "Entry name of the first divergence, or None.")
      .def_property_readonly("first_divergence_index",
                             [](const CompareResult& r) -> std::optional<uint32_t> { return r.first_divergence; })
      .def_property_readonly(
          "divergence",
          [](const std::shared_ptr<CompareResult>& r) -> py::object {
            if (!r->divergence) return py::none();
            const Divergence& d = *r->divergence;
            py::dict out;
            out["entry"] = r->target.entries[d.entry];
            out["entry_index"] = d.entry;
            out["kinds"] = kind_names(d.kinds);
            const CompareRow& row = r->rows[d.row];
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
          "The first divergence, or None: entry, entry_index, kinds (of 'parameter', 'output', 'integer-output', "
          "'unrecorded-input'), row (the name of the row that triggered), row_index, error (that row's, as "
          "Row.error), z_inputs / z_parameters / z_outputs (largest z of the entry's rows of each role), "
          "last_agreeing and unmatched_between (kind unrecorded-input), parameter_rows, "
          "parameter_rows_differing, parameters_throughout, message.")
      .def_property_readonly(
          "noise",
          [](const CompareResult& r) {
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
          [](const CompareResult& r) {
            const Coverage& c = r.coverage;
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
          [](const CompareResult& r) {
            std::vector<std::tuple<std::string, double, double>> out;
            for (const auto& f : r.floors_used) out.emplace_back(f.name, f.aggregate, f.extreme);
            return out;
          },
          "(table row, aggregate floor, extreme floor) for each row of the noise-floor table the matched rows used, "
          "floor_scale applied.")
      .def("entry_summaries",
           [](const CompareResult& r) {
             std::vector<std::tuple<std::optional<double>, const char*, bool>> out;
             for (const auto& e : entry_summaries(r))
               out.emplace_back(e.norm_rel_pct, verdict_name(e.verdict), e.first_divergence);
             return out;
           },
           "Per target entry, in execution order: (largest output NormRelativeErr or None, worst Result, "
           "is first divergence).")
      .def("entry_points",
           [](const CompareResult& r, const py::object& make, size_t max_points, std::optional<long> marked) {
             auto summaries = entry_summaries(r);
             // The referee's entry (or none, -1) replaces the engine's mark.
             if (marked)
               for (size_t i = 0; i < summaries.size(); ++i)
                 summaries[i].first_divergence = *marked >= 0 && i == static_cast<size_t>(*marked);
             std::optional<size_t> first_marked;
             for (size_t i = 0; i < summaries.size() && !first_marked; ++i)
               if (summaries[i].first_divergence) first_marked = i;
             // One object per point made here, with the verdict strings made
             // once: no intermediate lists of names and tuples.
             std::array<py::str, kNumVerdicts> verdicts;
             for (int v = 0; v < kNumVerdicts; ++v) verdicts[v] = py::str(verdict_name(static_cast<Verdict>(v)));
             const auto shown = plot_entries(summaries, max_points);
             py::list out(shown.size());
             for (size_t k = 0; k < shown.size(); ++k) {
               const size_t i = shown[k];
               const auto& e = summaries[i];
               py::object value = e.norm_rel_pct ? py::object(py::float_(*e.norm_rel_pct)) : py::object(py::none());
               out[k] = make(i, r.target.entries[i], value, verdicts[static_cast<size_t>(e.verdict)], e.first_divergence);
             }
             return py::make_tuple(summaries.size(), first_marked, out);
           },
           py::arg("make"), py::arg("max_points") = 0, py::arg("marked") = py::none(),
           "(number of target entries, index of the first marked entry or None, points): points are "
           "make(index, entry, largest output NormRelativeErr or None, worst Result, is marked) for the entries the "
           "plot shows (every entry, or one per bucket when there are more than max_points > 0; digest.h, "
           "plot_entries). marked: None marks the engine's first divergence, -1 no entry, i entry i.")
      .def("worst_rows",
           [](const std::shared_ptr<CompareResult>& r, size_t n) {
             py::list out;
             for (size_t i : worst_rows(*r, n)) out.append(RowView{r, i});
             return out;
           },
           py::arg("n"), "The n worst matched rows: by Result, then NormRelativeErr (NaN first).")
      .def("worst_row_digests",
           [](const std::shared_ptr<CompareResult>& r, size_t n) { return row_digests(r, worst_rows(*r, n)); },
           py::arg("n"), "row_digests of worst_rows(n), without a RowView per row.")
      .def("row_digests", &row_digests, py::arg("indices"),
           "The rows at indices as (name, entry, role, result, norm_rel_err_pct, target_norm, bench_norm, reasons, "
           "cosine, max_abs_err) tuples: outcome.RowDigest's fields, in its order.")
      .def("__len__", [](const CompareResult& r) { return r.rows.size(); })
      .def("render_csv", &render_csv, "The CSV text.")
      .def("write_csv", &write_csv, py::arg("path"), py::call_guard<py::gil_scoped_release>(),
           "Writes the CSV atomically (temporary file + rename).");

}

}  // namespace graphprobe::compare::python
