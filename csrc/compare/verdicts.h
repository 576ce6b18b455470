#pragma once
// The spec's Result rules, applied to matched rows. Torch-free.
//
// Per row:
//  * error: target Max or Min is NaN/±inf while the bench's is finite;
//  * error: dtype, shape or requires_grad differ (requires_grad only when
//    both sides recorded it).
// Per entry (over the entry's matched rows with a NormRelativeErr):
//  * error: every input's NormRelativeErr < input_error_pct (also when there
//    are no tensor inputs) and an output's
//    > output_error_pct -> that output row;
//  * warning: an output's NormRelativeErr > warning_ratio x the largest
//    input one, or > warning_pct when that largest is 0 or there are no
//    tensor inputs -> that output row. Outputs at or below noise_pct never
//    get the ratio warning (msprobe has no such floor and flags rounding
//    noise, e.g. 1e-6 % against 1e-8 %).
// NaN NormRelativeErrs (NaN on both sides) are not "below" anything, so an
// entry with one among its inputs never gets the error rule, and they are
// left out of the "largest input" of the warning rule.
// Unmatched rows get Result "unmatched" and take part in no rule.

#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

void apply_verdicts(const Dump& target, const Dump& bench, std::vector<CompareRow>& rows, const Thresholds& t);

}  // namespace graphprobe::compare
