#include "compare/parameter_inputs.h"

#include <string>
#include <unordered_map>

#include "compare/record_fingerprint.h"

namespace graphprobe::compare {
namespace {

// A floating tensor with all four statistics known and not constant.
bool identifiable(const TensorRecord& b) {
  if (!b.is_tensor || !b.shape_text.empty()) return false;
  const bool floating = b.dtype.find("float") != std::string::npos || b.dtype.find("half") != std::string::npos ||
                        b.dtype.find("double") != std::string::npos;
  if (!floating) return false;
  for (int s = 0; s < kNumStats; ++s)
    if (!b.stats[s]) return false;
  return *b.stats[kStatMax] != *b.stats[kStatMin];
}

}  // namespace

std::vector<int64_t> parameter_rows_of_inputs(const CompareResult& result) {
  const auto& rows = result.rows;
  const auto& entries = result.target.entries;
  std::vector<int64_t> out(rows.size(), -1);
  std::unordered_map<std::string, int64_t> parameters;  // bench fingerprint -> first parameter row
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].match != MatchKind::kMatched) continue;
    const TensorRecord& t = result.target.rows[static_cast<size_t>(rows[i].target)];
    const TensorRecord& b = result.bench.rows[static_cast<size_t>(rows[i].bench)];
    if (is_parameter_row(t, entries) && identifiable(b)) parameters.emplace(fingerprint(b), static_cast<int64_t>(i));
  }
  if (parameters.empty()) return out;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].match != MatchKind::kMatched) continue;
    const TensorRecord& t = result.target.rows[static_cast<size_t>(rows[i].target)];
    if (t.role != Role::kInput || is_parameter_row(t, entries)) continue;
    const TensorRecord& b = result.bench.rows[static_cast<size_t>(rows[i].bench)];
    if (!identifiable(b)) continue;
    const auto it = parameters.find(fingerprint(b));
    if (it != parameters.end()) out[i] = it->second;
  }
  return out;
}

}  // namespace graphprobe::compare
