#pragma once
// Reductions of a result for the summary and the report, done here so that
// Python never walks 100k rows. Torch-free.

#include <cstddef>
#include <optional>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// One target entry, for the execution-order plot.
struct EntrySummary {
  // Largest NormRelativeErr of its matched output rows (NaN counts as the
  // largest); of any matched row when no output has one; absent otherwise.
  std::optional<double> norm_rel_pct;
  // Worst Result of its rows (pass < warning < error); unmatched only when
  // every row is.
  Verdict verdict = Verdict::kUnmatched;
  bool first_divergence = false;
};

std::vector<EntrySummary> entry_summaries(const CompareResult& result);

// The entries the execution-order plot shows, in order: every entry when
// there are at most max_points (0: no limit), else buckets of
// ceil(n / max_points) consecutive entries, each shown by its first marked
// entry (the first divergence stays visible) or else its worst (Result, then
// value: absent lowest, NaN as inf; the first of equals). Done here so that a
// large compare makes a few thousand Python objects, not one per entry.
std::vector<size_t> plot_entries(const std::vector<EntrySummary>& entries, size_t max_points);

// Indices into result.rows of the n worst matched rows: by Result, then by
// NormRelativeErr (NaN first, rows without one last), then execution order.
std::vector<size_t> worst_rows(const CompareResult& result, size_t n);

}  // namespace graphprobe::compare
