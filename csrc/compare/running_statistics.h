#pragma once
// The running mean and variance a batch normalisation in training mode is
// handed. It normalises with the batch's own statistics and only updates the
// running ones in place, so they do not enter its outputs. Torch-free.
//
// After a training step they hold that step's batch statistics blended in
// by the momentum, and the blend rounds at the scale of the old value: eager
// bfloat16 blends in bfloat16, inductor in float32. A clean MobileNetV2
// (bfloat16, train mode, momentum 0.997) had a running variance of ~0.013,
// blended from 1.0 and equal batch variances of ~0.009, 6 % apart at step 1
// -- half an ulp of 1.0. Judged as data it was named as "code that is not
// recorded" before the call. It is neither a cause of the call nor an
// explanation of its outputs (docs/formats.md, "Running statistics").

#include <cstddef>
#include <utility>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// Per row of result.rows: true for a matched input row that is the running
// mean or variance of a batch normalisation that both sides called in
// training mode -- F.batch_norm's `running_mean`/`running_var` (positions 1,
// 2) with `training` (position 5) true, torch.batch_norm's (positions 3, 4,
// `training` 5), F.instance_norm's (1, 2) with `use_input_stats` (5, default
// true). A flag not recorded counts as its default (F.batch_norm: false).
// `ranges`: result.rows' entry ranges (entry_ranges.h), which the caller holds.
std::vector<bool> unused_running_statistics(const CompareResult& result,
                                            const std::vector<std::pair<size_t, size_t>>& ranges);

}  // namespace graphprobe::compare
