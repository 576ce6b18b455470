#include "compare/first_divergence.h"

#include <cmath>

namespace graphprobe::compare {
namespace {

bool norm_bad(const CompareRow& r, double limit) {
  const auto& n = r.metrics.rel_pct[kNorm];
  return n && (std::isnan(*n) || *n > limit);
}

}  // namespace

std::optional<uint32_t> find_first_divergence(const Dump& target, std::vector<CompareRow>& rows, const Thresholds& th) {
  size_t begin = 0;
  while (begin < rows.size() && rows[begin].target >= 0) {
    const uint32_t entry = target.rows[static_cast<size_t>(rows[begin].target)].entry;
    size_t end = begin + 1;
    while (end < rows.size() && rows[end].target >= 0 &&
           target.rows[static_cast<size_t>(rows[end].target)].entry == entry)
      ++end;
    bool inputs_fine = true, output_bad = false;
    for (size_t i = begin; i < end; ++i) {
      const CompareRow& r = rows[i];
      if (r.match != MatchKind::kMatched) continue;
      const bool bad = r.verdict == Verdict::kError || norm_bad(r, th.warning_pct);
      if (target.rows[static_cast<size_t>(r.target)].role == Role::kInput) inputs_fine = inputs_fine && !bad;
      else output_bad = output_bad || bad;
    }
    if (inputs_fine && output_bad) {
      for (size_t i = begin; i < end; ++i) rows[i].first_divergence = true;
      return entry;
    }
    begin = end;
  }
  return std::nullopt;
}

}  // namespace graphprobe::compare
