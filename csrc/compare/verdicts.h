#pragma once
// The Result rules of msprobe's statistics compare, applied per entry.
// Torch-free.
//
// msprobe/core/compare/indicator_analysis/algorithm.py, STATISTICS_CHECKERS,
// reproduced edge cases included; the rule table is in docs/formats.md
// ("Result rules"). In short, over the rows of one entry, where "outputs"
// are the rows whose name contains ".output." and "inputs" all others
// (arguments, parameters, parameter gradients, non-tensor values):
//  * error: a row's target Max or Min is NaN/±inf while the bench's are
//    not (unmatched rows too);
//  * error: requires_grad, dtype or shape differ; a non-tensor input's
//    value differs;
//  * error: the largest input NormRelativeErr is < input_error_pct and an
//    output's is > output_error_pct (an "inf" output counts; an "inf" input
//    does not);
//  * warning, on the entry's first output row: the largest output
//    NormRelativeErr is > warning_ratio x the largest input's, or
//    > warning_pct when that is 0.
// Entries of some APIs (empty, to, numpy, ...) skip rules, as in msprobe.
//
// graphprobe's additions change nothing unless graphprobe_verdicts is set:
// then unmatched rows get Result "unmatched", and the warning is not given
// when the largest output NormRelativeErr is at or below noise_pct.

#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// Which of msprobe's checker lists runs: STATISTICS_CHECKERS, or
// TENSOR_CHECKERS (real data), whose two entry rules replace the
// NormRelativeErr ones (over the entry's rows, numbers only, words skipped;
// a side without a number counts as 1.0):
//  * error, on the entry's first output row: the lowest input One
//    Thousandth Err Ratio is > thousandth_input_min and the lowest output's
//    is < thousandth_output_max;
//  * warning, on the same row: the lowest input Cosine is > cosine_input_min
//    and the lowest output's is lower than that by more than cosine_drop.
// The real-data rules read the rows' tensor metrics (TensorMetrics.values).
enum class RuleSet : uint8_t { kStatistics, kRealData };

void apply_verdicts(const Dump& target, const Dump& bench, std::vector<CompareRow>& rows, const Thresholds& t,
                    bool graphprobe_verdicts, RuleSet rules = RuleSet::kStatistics);

}  // namespace graphprobe::compare
