#include "compare/verdicts.h"

#include <cmath>

#include "compare/entry_ranges.h"

namespace graphprobe::compare {
namespace {

std::string pct(double v) { return format_number(v) + "%"; }

void row_rules(const TensorRecord& t, const TensorRecord& b, CompareRow& row) {
  for (int s : {kMax, kMin}) {
    const char* name = s == kMax ? "Max" : "Min";
    if (t.stats[s] && b.stats[s] && !std::isfinite(*t.stats[s]) && std::isfinite(*b.stats[s]))
      row.raise(Verdict::kError, std::string("target ") + name + " is " + format_number(*t.stats[s]) +
                                     " while bench " + name + " is finite");
  }
  if (t.dtype != b.dtype) row.raise(Verdict::kError, "dtype mismatch: " + t.dtype + " vs " + b.dtype);
  if (t.shape != b.shape)
    row.raise(Verdict::kError, "shape mismatch: " + shape_str(t.shape) + " vs " + shape_str(b.shape));
  if (t.requires_grad && b.requires_grad && *t.requires_grad != *b.requires_grad)
    row.raise(Verdict::kError, std::string("requires_grad mismatch: ") + (*t.requires_grad ? "True" : "False") +
                                   " vs " + (*b.requires_grad ? "True" : "False"));
}

void entry_rules(const Dump& target, std::vector<CompareRow>& rows, size_t begin, size_t end, const Thresholds& th) {
  bool inputs_below = true;  // every input's NormRelativeErr < input_error_pct
  double largest_input = 0;
  for (size_t i = begin; i < end; ++i) {
    const CompareRow& r = rows[i];
    if (r.match != MatchKind::kMatched) continue;
    if (target.rows[static_cast<size_t>(r.target)].role != Role::kInput) continue;
    const auto& n = r.metrics.rel_pct[kNorm];
    if (!n) continue;
    if (!(*n < th.input_error_pct)) inputs_below = false;
    if (!std::isnan(*n) && *n > largest_input) largest_input = *n;
  }
  for (size_t i = begin; i < end; ++i) {
    CompareRow& r = rows[i];
    if (r.match != MatchKind::kMatched) continue;
    if (target.rows[static_cast<size_t>(r.target)].role != Role::kOutput) continue;
    const auto& n = r.metrics.rel_pct[kNorm];
    if (!n || std::isnan(*n)) continue;
    if (inputs_below && *n > th.output_error_pct)
      r.raise(Verdict::kError, "output NormRelativeErr " + pct(*n) + " > " + pct(th.output_error_pct) +
                                   " while every input's is < " + pct(th.input_error_pct));
    if (largest_input > 0) {
      if (*n > th.warning_ratio * largest_input && *n > th.noise_pct)
        r.raise(Verdict::kWarning, "output NormRelativeErr " + pct(*n) + " > " + format_number(th.warning_ratio) +
                                       "x the largest input's (" + pct(largest_input) + ")");
    } else if (*n > th.warning_pct) {
      r.raise(Verdict::kWarning, "output NormRelativeErr " + pct(*n) + " > " + pct(th.warning_pct) +
                                     " while the inputs' is 0");
    }
  }
}

}  // namespace

void apply_verdicts(const Dump& target, const Dump& bench, std::vector<CompareRow>& rows, const Thresholds& th) {
  for (CompareRow& r : rows) {
    if (r.match == MatchKind::kTargetOnly) {
      r.raise(Verdict::kUnmatched, "no matching bench row");
    } else if (r.match == MatchKind::kBenchOnly) {
      r.raise(Verdict::kUnmatched, "no matching target row");
    } else {
      row_rules(target.rows[static_cast<size_t>(r.target)], bench.rows[static_cast<size_t>(r.bench)], r);
    }
  }
  for (const auto& [begin, end] : entry_ranges(target, rows)) entry_rules(target, rows, begin, end, th);
}

}  // namespace graphprobe::compare
