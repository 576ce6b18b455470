#pragma once
// Differences and relative errors of two records' statistics, as msprobe's
// statistics compare computes them (CalcStatsDiff in
// msprobe/core/compare/acc_compare.py). Torch-free.

#include <string>

#include "compare/dump_reader.h"

namespace graphprobe::compare {

// What msprobe writes in a statistic's diff and relative-error cells.
enum class StatDiff : uint8_t {
  kNA,         // "N/A": a side is missing, or a pair no rule covers
  kSame,       // "0", "0": the two values print the same (also NaN and NaN)
  kNumbers,    // target - bench, "|diff / bench| * 100%"
  kBenchZero,  // target - bench, "inf": numbers with a bench of 0
  kInf,        // "inf", "inf": e.g. target inf, bench a number
  kNegInf,     // "-inf", "-inf": e.g. target a number, bench inf
  kNan,        // "Nan", "Nan": a NaN against a number or an infinity
  kDiff,       // "Diff", "Diff": text, None, booleans or devices that differ
};

struct Metrics {
  // Numeric views of the cells: absent for N/A and Diff; inf, -inf or NaN
  // for those kinds; 0 for kSame.
  StatArray diff;     // target - bench
  StatArray rel_pct;  // |diff / bench| * 100
  std::array<StatDiff, kNumStats> kind{};
};

// Per statistic, msprobe's rules (docs/formats.md, "Statistics").
Metrics compute_metrics(const TensorRecord& target, const TensorRecord& bench);

// The diff and relative-error cells of statistic s, as msprobe writes them.
std::string diff_cell(const Metrics& m, int s);
std::string rel_cell(const Metrics& m, int s);

}  // namespace graphprobe::compare
