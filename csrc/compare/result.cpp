#include "compare/result.h"

namespace graphprobe::compare {

const char* match_name(MatchKind m) {
  switch (m) {
    case MatchKind::kMatched: return "matched";
    case MatchKind::kTargetOnly: return "unmatched-target";
    case MatchKind::kBenchOnly: return "unmatched-bench";
  }
  return "?";
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kWarning: return "warning";
    case Verdict::kError: return "error";
    case Verdict::kUnmatched: return "unmatched";
  }
  return "?";
}

bool has_tensor_data(const CompareResult& result) {
  auto any = [](const Dump& d) {
    for (const TensorRecord& r : d.rows)
      if (!r.data_name.empty()) return true;
    return false;
  };
  return any(result.target) && any(result.bench);
}

}  // namespace graphprobe::compare
