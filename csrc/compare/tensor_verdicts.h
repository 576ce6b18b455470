#pragma once
// Result rules of tensor mode (msprobe's real-data checkers), applied after
// the statistics rules to rows whose TensorMetrics are set. Torch-free.
//
// Per row:
//  * error: the tensor metrics were not computed because dtype or shape
//    differ (TensorStatus::kMismatch);
//  * warning: they were not computed because a tensor file is missing or
//    unreadable (kUnavailable): the row could not be checked;
//  * notes on undefined values (e.g. "Cosine: all the bench data is zero")
//    go to Err_message without changing Result.
// Per entry (over its matched rows with computed metrics; NaN values and
// empty tensors take no part; with no input value, the inputs' minimum is 1):
//  * error: the lowest input One Thousandth Err Ratio > thousandth_input_min
//    and an output's < thousandth_output_max -> that output row;
//  * warning: the lowest input Cosine > cosine_input_min and an output's
//    Cosine is lower than that by more than cosine_drop -> that output row.
// msprobe applies both to the entry's first output, comparing the lowest
// output value; here each output row is judged, so several outputs can be
// flagged.

#include "compare/result.h"

namespace graphprobe::compare {

void apply_tensor_verdicts(const Dump& target, std::vector<CompareRow>& rows, const Thresholds& t);

}  // namespace graphprobe::compare
