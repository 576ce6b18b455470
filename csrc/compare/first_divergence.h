#pragma once
// Where the target starts to differ. Torch-free.
//
// Walks the target's entries in execution order (the dumper lists calls as
// they complete, children before parents) and returns the first entry whose
// outputs went bad while its inputs were fine:
//  * bad output: a matched output row with Result error, or with
//    NormRelativeErr > warning_pct (NaN counts as bad);
//  * fine inputs: no matched input row with Result error or with
//    NormRelativeErr > warning_pct or NaN (an entry without tensor inputs
//    has fine inputs).
// Entries whose rows are all unmatched are skipped: there is nothing to
// judge. The rows of the entry found get first_divergence = true.

#include <optional>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

std::optional<uint32_t> find_first_divergence(const Dump& target, std::vector<CompareRow>& rows, const Thresholds& t);

}  // namespace graphprobe::compare
