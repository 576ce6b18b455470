// CompareOptions: matching mode, verdict layout and the thresholds, whose
// defaults come from Thresholds (result.h) alone.
#include <pybind11/stl.h>

#include <stdexcept>

#include "python/compare/bindings.h"

namespace graphprobe::compare::python {

const char* layout_name(TensorLayout l) { return l == TensorLayout::kMsprobe ? "msprobe" : "graphprobe"; }

TensorLayout parse_layout(const std::string& s) {
  if (s == "msprobe") return TensorLayout::kMsprobe;
  if (s == "graphprobe") return TensorLayout::kStatisticsPlusTensor;
  throw std::invalid_argument("tensor_layout must be 'msprobe' or 'graphprobe', got '" + s + "'");
}

void bind_options(py::module_& m) {
  const Thresholds d;  // the defaults
  py::class_<CompareOptions> options(m, "CompareOptions", "Matching mode and verdict thresholds (percentages).");
  options
      .def(py::init([](bool fuzzy, double input_error_pct, double output_error_pct, double warning_ratio,
                       double warning_pct, double noise_pct, double cosine_input_min, double cosine_drop,
                       double thousandth_input_min, double thousandth_output_max, bool graphprobe_verdicts,
                       const std::string& tensor_layout, double floor_scale, double divergence_ratio) {
             CompareOptions o;
             o.fuzzy = fuzzy;
             o.graphprobe_verdicts = graphprobe_verdicts;
             o.tensor_layout = parse_layout(tensor_layout);
             o.thresholds = {input_error_pct, output_error_pct,    warning_ratio,        warning_pct,
                             noise_pct,       cosine_input_min,    cosine_drop,          thousandth_input_min,
                             thousandth_output_max, floor_scale,       divergence_ratio};
             return o;
           }),
           py::kw_only(), py::arg("fuzzy") = false, py::arg("input_error_pct") = d.input_error_pct,
           py::arg("output_error_pct") = d.output_error_pct, py::arg("warning_ratio") = d.warning_ratio,
           py::arg("warning_pct") = d.warning_pct, py::arg("noise_pct") = d.noise_pct,
           py::arg("cosine_input_min") = d.cosine_input_min, py::arg("cosine_drop") = d.cosine_drop,
           py::arg("thousandth_input_min") = d.thousandth_input_min,
           py::arg("thousandth_output_max") = d.thousandth_output_max, py::arg("graphprobe_verdicts") = false,
           py::arg("tensor_layout") = "msprobe", py::arg("floor_scale") = d.floor_scale,
           py::arg("divergence_ratio") = d.divergence_ratio)
      .def_readwrite("fuzzy", &CompareOptions::fuzzy)
      .def_property_readonly("tensor_layout", [](const CompareOptions& o) { return layout_name(o.tensor_layout); },
                             "Tensor dumps: 'msprobe' (its real-data CSV and rules) or 'graphprobe' (the statistics "
                             "CSV and rules plus the tensor columns and graphprobe's tensor rules).")
      .def_readwrite("graphprobe_verdicts", &CompareOptions::graphprobe_verdicts,
                     "Result follows graphprobe's additions (unmatched, noise floor), not only msprobe's rules.")
      .def_readwrite("step", &CompareOptions::step,
                     "The training step of the pair (-1: not known). At step 1 the parameters of a dump that "
                     "records a backward pass explain their calls' outputs but are no first divergence of their "
                     "own: they carry the first update.")
      .def_readwrite("parameters_as_causes", &CompareOptions::parameters_as_causes,
                     "Parameters are causes at every step (the rule before issue 35; to look for an error in the "
                     "optimizer's update).")
      .def_readwrite("carried_parameters", &CompareOptions::carried_parameters,
                     "From step 2 on: the parameters ('{module path}.{name}') that differed at the step before, "
                     "or whose gradient did (that pair's differing_parameters): they carry it on and are no "
                     "first divergence of their own.")
      .def_property(
          "update_basis",
          [](const CompareOptions& o) { return basis_tuples(o.update_basis); },
          [](CompareOptions& o, const std::vector<BasisTuple>& in) {
            o.update_basis.clear();
            for (const auto& [key, sketch, error] : in) o.update_basis.push_back({key, sketch, error});
          },
          "At step 1: step 0's parameter_basis of the same process, (key, the bench's Sketch of the parameter, "
          "its gradients' relative error) per parameter. Parameter rows further apart than the first update's "
          "rounding explains are then causes, where at least half of those judged are (docs/formats.md, "
          "\"Parameters after an update\").");
  // One read-only property per threshold, from the table.
  for (const ThresholdField& f : kThresholdFields) {
    const auto member = f.member;
    options.def_property_readonly(f.name, [member](const CompareOptions& o) { return o.thresholds.*member; });
  }

  m.def(
      "threshold_defaults",
      []() {
        const Thresholds t;
        py::dict out;
        for (const ThresholdField& f : kThresholdFields) out[f.name] = t.*(f.member);
        return out;
      },
      "Every threshold's default, by CompareOptions keyword, in table order (csrc/compare/result.h): the one "
      "source of graphprobe.compare.Thresholds' and the CLI's defaults.");
}

}  // namespace graphprobe::compare::python
