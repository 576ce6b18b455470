#include "compare/metrics.h"

#include <cmath>
#include <limits>

namespace graphprobe::compare {

double relative_error_pct(double target, double bench) {
  if (std::isnan(target) || std::isnan(bench)) return std::numeric_limits<double>::quiet_NaN();
  if (target == bench) return 0.0;
  if (bench == 0.0) return std::numeric_limits<double>::infinity();
  return std::fabs((target - bench) / bench) * 100.0;
}

Metrics compute_metrics(const TensorRecord& target, const TensorRecord& bench) {
  Metrics m;
  for (int s = 0; s < kNumStats; ++s) {
    if (!target.stats[s] || !bench.stats[s]) continue;
    const double t = *target.stats[s];
    const double b = *bench.stats[s];
    m.diff[s] = t == b ? 0.0 : t - b;  // inf == inf: no difference, not NaN
    m.rel_pct[s] = relative_error_pct(t, b);
  }
  return m;
}

}  // namespace graphprobe::compare
