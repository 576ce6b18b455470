#include "compare/metrics.h"

#include <cmath>
#include <limits>

#include "compare/cell_text.h"
#include "compare/msprobe_values.h"

namespace graphprobe::compare {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// msprobe's rule table for two values that do not print the same
// (CalcStatsDiff.build_rules); kNA where it has no rule.
StatDiff rule(ValClass t, ValClass b) {
  using V = ValClass;
  if (t == V::kNA || b == V::kNA) return StatDiff::kNA;
  if (t == V::kDevice && b == V::kDevice) return StatDiff::kNA;
  if (t == V::kDevice || b == V::kDevice || t == V::kOther || b == V::kOther) return StatDiff::kDiff;
  if (t == V::kNan || b == V::kNan) return StatDiff::kNan;
  if (t == V::kNum && b == V::kNum) return StatDiff::kNumbers;
  if (t == V::kInf && (b == V::kNum || b == V::kNegInf)) return StatDiff::kInf;
  if (t == V::kNegInf && (b == V::kNum || b == V::kInf)) return StatDiff::kNegInf;
  if (t == V::kNum && b == V::kInf) return StatDiff::kNegInf;
  if (t == V::kNum && b == V::kNegInf) return StatDiff::kInf;
  return StatDiff::kNA;  // inf vs inf written differently ("inf", "Inf")
}

}  // namespace

Metrics compute_metrics(const TensorRecord& target, const TensorRecord& bench) {
  Metrics m;
  for (int s = 0; s < kNumStats; ++s) {
    if (same_print(target, bench, s)) {
      m.kind[s] = StatDiff::kSame;
      m.diff[s] = 0.0;
      m.rel_pct[s] = 0.0;
      continue;
    }
    double t = 0, b = 0;
    const ValClass ct = classify(target, s, &t), cb = classify(bench, s, &b);
    StatDiff k = rule(ct, cb);
    switch (k) {
      case StatDiff::kNumbers:
        m.diff[s] = t - b;
        if (b == 0) {
          k = StatDiff::kBenchZero;
          m.rel_pct[s] = kInfinity;
        } else {
          m.rel_pct[s] = std::fabs((t - b) / b * 100);  // msprobe's order of operations
        }
        break;
      case StatDiff::kInf: m.diff[s] = m.rel_pct[s] = kInfinity; break;
      case StatDiff::kNegInf: m.diff[s] = m.rel_pct[s] = -kInfinity; break;
      case StatDiff::kNan: m.diff[s] = m.rel_pct[s] = std::numeric_limits<double>::quiet_NaN(); break;
      default: break;
    }
    m.kind[s] = k;
  }
  return m;
}

std::string diff_cell(const Metrics& m, int s) {
  switch (m.kind[s]) {
    case StatDiff::kNA: return "N/A";
    case StatDiff::kSame: return "0";
    case StatDiff::kNumbers:
    case StatDiff::kBenchZero: return format_number(*m.diff[s]);
    case StatDiff::kInf: return "inf";
    case StatDiff::kNegInf: return "-inf";
    case StatDiff::kNan: return "Nan";
    case StatDiff::kDiff: return "Diff";
  }
  return "N/A";
}

std::string rel_cell(const Metrics& m, int s) {
  switch (m.kind[s]) {
    case StatDiff::kNumbers: return format_number(*m.rel_pct[s]) + "%";
    case StatDiff::kBenchZero: return "inf";
    default: return diff_cell(m, s);
  }
}

}  // namespace graphprobe::compare
