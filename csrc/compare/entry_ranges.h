#pragma once
// The compare rows of each target entry. Torch-free.

#include <cstddef>
#include <utility>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// [begin, end) ranges of `rows`, one per target entry, in execution order.
// Target rows come first and in order (matching.h), so an entry's rows are
// adjacent; bench-only rows at the end belong to no entry.
inline std::vector<std::pair<size_t, size_t>> entry_ranges(const Dump& target, const std::vector<CompareRow>& rows) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  while (begin < rows.size() && rows[begin].target >= 0) {
    const uint32_t entry = target.rows[static_cast<size_t>(rows[begin].target)].entry;
    size_t end = begin + 1;
    while (end < rows.size() && rows[end].target >= 0 &&
           target.rows[static_cast<size_t>(rows[end].target)].entry == entry)
      ++end;
    out.emplace_back(begin, end);
    begin = end;
  }
  return out;
}

}  // namespace graphprobe::compare
