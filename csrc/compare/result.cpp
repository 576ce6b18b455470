#include "compare/result.h"

#include <stdexcept>

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

const char* word_name(CellWord w) {
  switch (w) {
    case CellWord::kNone: return "";
    case CellWord::kUnsupported: return "unsupported";
    case CellWord::kShapeUnmatched: return "shape unmatched";
    case CellWord::kNotAvailable: return "N/A";
    case CellWord::kNan: return "Nan";
  }
  return "?";
}

CellWord parse_word(const std::string& text) {
  for (CellWord w : {CellWord::kUnsupported, CellWord::kShapeUnmatched, CellWord::kNotAvailable, CellWord::kNan})
    if (text == word_name(w)) return w;
  throw std::invalid_argument("a tensor metric cell holds a number or one of 'unsupported', 'shape unmatched', "
                              "'N/A', 'Nan'; got '" + text + "'");
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
