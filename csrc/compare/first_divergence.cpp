#include "compare/first_divergence.h"

#include <cmath>

#include "compare/entry_ranges.h"

namespace graphprobe::compare {
namespace {

bool norm_bad(const CompareRow& r, double limit) {
  const auto& n = r.metrics.rel_pct[kNorm];
  return n && (std::isnan(*n) || *n > limit);
}

}  // namespace

std::optional<uint32_t> find_first_divergence(const Dump& target, std::vector<CompareRow>& rows, const Thresholds& th) {
  for (const auto& [begin, end] : entry_ranges(target, rows)) {
    const uint32_t entry = target.rows[static_cast<size_t>(rows[begin].target)].entry;
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
  }
  return std::nullopt;
}

}  // namespace graphprobe::compare
