#pragma once
// API calls take a module's parameters as plain inputs (F.linear(x, weight,
// bias), F.embedding(ids, weight)). At L1 and mix those rows are the same
// tensors as the module entry's `parameters.*` rows, and after an optimizer
// step they drift between eager and compiled runs for the same reasons
// (docs/formats.md, "A parameter row is a cause on Max, Min, Mean and Norm
// only"). Judged as data they read as "the model's inputs already differ" or
// as unrecorded code before the call; judged as the parameters they are,
// they follow the parameter rules. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// A module entry's `{entry}.parameters.{name}` row: the segment right after
// the entry's own name, so that a module called "parameters_proj" or an
// argument named "parameters" elsewhere in the name does not count.
inline bool is_parameter_row(const TensorRecord& t, const std::vector<std::string>& entries) {
  return t.role == Role::kInput && t.suffix(entries).substr(0, 11) == "parameters.";
}

// Per row of result.rows: for a matched floating input row that is not a
// parameter row itself, the index of a parameter row whose bench record is
// the same tensor (dtype, shape and the four statistics bit for bit; a
// constant tensor -- Max equal to Min, e.g. a zero bias -- is never matched,
// since any other constant tensor of its shape would match it too); -1 for
// every other row.
std::vector<int64_t> parameter_rows_of_inputs(const CompareResult& result);

}  // namespace graphprobe::compare
