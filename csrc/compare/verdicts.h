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

void apply_verdicts(const Dump& target, const Dump& bench, std::vector<CompareRow>& rows, const Thresholds& t,
                    bool graphprobe_verdicts);

}  // namespace graphprobe::compare
