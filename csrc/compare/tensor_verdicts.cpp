#include "compare/tensor_verdicts.h"

#include <algorithm>
#include <cmath>

#include "compare/cell_text.h"
#include "compare/entry_ranges.h"

namespace graphprobe::compare {
namespace {

// The value when the row has a usable one (computed, present, not NaN).
std::optional<double> usable(const CompareRow& r, TensorMetric m) {
  if (r.match != MatchKind::kMatched || r.tensor->status != TensorStatus::kComputed) return std::nullopt;
  const auto& v = r.tensor->values[m];
  if (!v || std::isnan(*v)) return std::nullopt;
  return v;
}

void row_rules(CompareRow& r) {
  switch (r.tensor->status) {
    case TensorStatus::kNone: return;
    case TensorStatus::kMismatch:
      for (const auto& n : r.tensor->notes) r.raise(Verdict::kError, "tensor metrics not computed: " + n);
      return;
    case TensorStatus::kUnavailable:
      for (const auto& n : r.tensor->notes) r.raise(Verdict::kWarning, "tensor metrics not computed: " + n);
      return;
    case TensorStatus::kComputed:
      for (const auto& n : r.tensor->notes) r.raise(Verdict::kPass, n);
      return;
  }
}

void entry_rules(const Dump& target, std::vector<CompareRow>& rows, size_t begin, size_t end, const Thresholds& th) {
  double min_cos = 1.0, min_ratio = 1.0;
  for (size_t i = begin; i < end; ++i) {
    const CompareRow& r = rows[i];
    if (r.match != MatchKind::kMatched || target.rows[static_cast<size_t>(r.target)].role != Role::kInput) continue;
    if (auto c = usable(r, kCosine)) min_cos = std::min(min_cos, *c);
    if (auto q = usable(r, kOneThousandthRatio)) min_ratio = std::min(min_ratio, *q);
  }
  for (size_t i = begin; i < end; ++i) {
    CompareRow& r = rows[i];
    if (r.match != MatchKind::kMatched || target.rows[static_cast<size_t>(r.target)].role != Role::kOutput) continue;
    if (auto q = usable(r, kOneThousandthRatio); q && min_ratio > th.thousandth_input_min && *q < th.thousandth_output_max)
      r.raise(Verdict::kError, "output One Thousandth Err Ratio " + format_number(*q) + " < " +
                                   format_number(th.thousandth_output_max) + " while every input's is > " +
                                   format_number(th.thousandth_input_min));
    if (auto c = usable(r, kCosine); c && min_cos > th.cosine_input_min && min_cos - *c > th.cosine_drop)
      r.raise(Verdict::kWarning, "output Cosine " + format_number(*c) + " is more than " +
                                     format_number(th.cosine_drop) + " below the lowest input's (" +
                                     format_number(min_cos) + " > " + format_number(th.cosine_input_min) + ")");
  }
}

}  // namespace

void apply_tensor_verdicts(const Dump& target, std::vector<CompareRow>& rows, const Thresholds& th) {
  for (CompareRow& r : rows) row_rules(r);
  for (const auto& [begin, end] : entry_ranges(target, rows)) entry_rules(target, rows, begin, end, th);
}

}  // namespace graphprobe::compare
