#include "compare/digest.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace graphprobe::compare {
namespace {

// NaN above inf above every number; absent below all.
double rank_value(const std::optional<double>& v) {
  if (!v) return -1.0;
  return std::isnan(*v) ? std::numeric_limits<double>::max() : (std::isinf(*v) ? 1e300 : *v);
}

int severity(Verdict v) { return v == Verdict::kUnmatched ? -1 : static_cast<int>(v); }

}  // namespace

std::vector<EntrySummary> entry_summaries(const CompareResult& result) {
  std::vector<EntrySummary> out(result.target.entries.size());
  std::vector<std::optional<double>> any(out.size());
  for (const CompareRow& r : result.rows) {
    if (r.target < 0) continue;
    const TensorRecord& t = result.target.rows[static_cast<size_t>(r.target)];
    EntrySummary& e = out[t.entry];
    if (severity(r.verdict) > severity(e.verdict)) e.verdict = r.verdict;
    e.first_divergence = e.first_divergence || r.first_divergence;
    const auto& n = r.metrics.rel_pct[kStatNorm];
    if (!n) continue;
    if (rank_value(n) > rank_value(any[t.entry])) any[t.entry] = n;
    if (t.role == Role::kOutput && rank_value(n) > rank_value(e.norm_rel_pct)) e.norm_rel_pct = n;
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (!out[i].norm_rel_pct) out[i].norm_rel_pct = any[i];
  return out;
}

std::vector<size_t> plot_entries(const std::vector<EntrySummary>& entries, size_t max_points) {
  const size_t n = entries.size();
  std::vector<size_t> out;
  if (max_points == 0 || n <= max_points) {
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] = i;
    return out;
  }
  // The report's order before this moved here (report.py, Python's max with
  // a key): NaN and inf rank alike, so the first of them wins.
  auto key_value = [](const std::optional<double>& v) {
    if (!v) return -1.0;
    return std::isnan(*v) ? std::numeric_limits<double>::infinity() : *v;
  };
  const size_t size = (n + max_points - 1) / max_points;
  for (size_t start = 0; start < n; start += size) {
    const size_t end = std::min(n, start + size);
    size_t pick = start;
    for (size_t i = start; i < end; ++i) {
      if (entries[i].first_divergence) {
        pick = i;
        break;
      }
      const EntrySummary& a = entries[i];
      const EntrySummary& b = entries[pick];
      const int sa = severity(a.verdict), sb = severity(b.verdict);
      if (sa > sb || (sa == sb && key_value(a.norm_rel_pct) > key_value(b.norm_rel_pct))) pick = i;
    }
    out.push_back(pick);
  }
  return out;
}

std::vector<size_t> worst_rows(const CompareResult& result, size_t n) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < result.rows.size(); ++i)
    if (result.rows[i].match == MatchKind::kMatched) idx.push_back(i);
  auto worse = [&](size_t a, size_t b) {
    const CompareRow& x = result.rows[a];
    const CompareRow& y = result.rows[b];
    if (x.verdict != y.verdict) return severity(x.verdict) > severity(y.verdict);
    const double vx = rank_value(x.metrics.rel_pct[kStatNorm]), vy = rank_value(y.metrics.rel_pct[kStatNorm]);
    if (vx != vy) return vx > vy;
    return a < b;
  };
  n = std::min(n, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(), worse);
  idx.resize(n);
  return idx;
}

}  // namespace graphprobe::compare
