#pragma once
// Differences and relative errors of two tensors' statistics. Torch-free.

#include "compare/dump_reader.h"

namespace graphprobe::compare {

struct Metrics {
  StatArray diff;     // target - bench
  StatArray rel_pct;  // |diff / bench| * 100
};

// |target - bench| / |bench| as a percentage. Decisions where the spec is
// silent: equal values give 0 (also 0 vs 0, and inf vs inf of the same sign:
// identical statistics are not an error), bench 0 with target != 0 gives
// inf, and a NaN on either side gives NaN.
double relative_error_pct(double target, double bench);

// Per statistic; absent where either side lacks that statistic.
Metrics compute_metrics(const TensorRecord& target, const TensorRecord& bench);

}  // namespace graphprobe::compare
