#pragma once
// graphprobe._compare's binders, one per part, as csrc/python/bindings.h
// does for _C: compare_module.cpp calls each once. Shared here: the row view
// the Row and CompareResult binders both hand out, and the conversions of
// the engine's enums to the strings Python sees.
#include <pybind11/pybind11.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare::python {

namespace py = pybind11;

using ResultPtr = std::shared_ptr<const CompareResult>;

// One CSV row, read-only; keeps its result alive.
struct RowView {
  ResultPtr result;
  size_t index;

  const CompareRow& row() const { return result->rows[index]; }
  const TensorRecord* target() const {
    return row().target >= 0 ? &result->target.rows[static_cast<size_t>(row().target)] : nullptr;
  }
  const TensorRecord* bench() const {
    return row().bench >= 0 ? &result->bench.rows[static_cast<size_t>(row().bench)] : nullptr;
  }
  // The side that exists, the target when both do.
  const TensorRecord& any() const { return target() ? *target() : *bench(); }
  const Dump& any_dump() const { return target() ? result->target : result->bench; }
};

// A parameter basis (CompareOptions.update_basis, CompareResult.parameter_basis)
// as Python sees it: (key, Sketch, gradient error) per parameter.
using BasisTuple = std::tuple<std::string, std::array<double, 4>, double>;
inline std::vector<BasisTuple> basis_tuples(const std::vector<UpdateBasis>& basis) {
  std::vector<BasisTuple> out;
  out.reserve(basis.size());
  for (const UpdateBasis& u : basis) out.emplace_back(u.key, u.sketch, u.gradient_error);
  return out;
}

// None for an empty string.
std::optional<std::string> non_empty(const std::string& s);
// "msprobe" / "graphprobe", and back (std::invalid_argument naming both).
const char* layout_name(TensorLayout l);
TensorLayout parse_layout(const std::string& s);
// A RowError as Python sees it: per-statistic errors, z, the floor used.
py::dict row_error_dict(const RowError& e, double floor_scale);

void bind_options(py::module_& m);  // CompareOptions, threshold_defaults()
void bind_row(py::module_& m);      // Row
void bind_result(py::module_& m);   // CompareResult
void bind_checksums(py::module_& m);  // ChecksumComparison, compare_checksums(), checksum_digits()
void bind_profile(py::module_& m);    // profile_files() (benchmarks)

}  // namespace graphprobe::compare::python
