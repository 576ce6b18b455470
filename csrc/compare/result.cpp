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

}  // namespace graphprobe::compare
