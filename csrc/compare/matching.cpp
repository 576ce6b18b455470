#include "compare/matching.h"

#include <unordered_map>

namespace graphprobe::compare {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find('.', start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

// Row key used for pairing: its name, or in fuzzy mode the name with the
// call index stripped from the entry part.
std::string key_of(const Dump& d, const TensorRecord& r, bool fuzzy) {
  if (!fuzzy) return r.name;
  std::string k = strip_call_index(d.entries[r.entry]);
  k.push_back('.');
  k.append(r.suffix(d.entries));
  return k;
}

}  // namespace

std::string strip_call_index(std::string_view entry) {
  auto parts = split_dots(entry);
  // The index sits next to "forward"/"backward": after it for modules, before
  // it for APIs. Only the last such component is stripped.
  for (size_t i = parts.size(); i-- > 0;) {
    if (parts[i] != "forward" && parts[i] != "backward") continue;
    size_t drop = parts.size();
    if (i + 1 < parts.size() && all_digits(parts[i + 1])) drop = i + 1;
    else if (i > 0 && all_digits(parts[i - 1])) drop = i - 1;
    if (drop == parts.size()) break;
    std::string out;
    for (size_t j = 0; j < parts.size(); ++j) {
      if (j == drop) continue;
      if (!out.empty()) out.push_back('.');
      out.append(parts[j]);
    }
    return out;
  }
  return std::string(entry);
}

std::vector<CompareRow> match_rows(const Dump& target, const Dump& bench, bool fuzzy) {
  // key -> bench row indices with that key, in bench order; `next` walks them.
  struct Slot {
    std::vector<int64_t> rows;
    size_t next = 0;
  };
  std::unordered_map<std::string, Slot> by_key;
  by_key.reserve(bench.rows.size());
  for (size_t i = 0; i < bench.rows.size(); ++i)
    by_key[key_of(bench, bench.rows[i], fuzzy)].rows.push_back(static_cast<int64_t>(i));

  std::vector<bool> bench_used(bench.rows.size(), false);
  std::vector<CompareRow> rows;
  rows.reserve(target.rows.size() + 8);
  for (size_t i = 0; i < target.rows.size(); ++i) {
    CompareRow row;
    row.target = static_cast<int64_t>(i);
    auto it = by_key.find(key_of(target, target.rows[i], fuzzy));
    // Exact mode pairs a name once: a repeated name is a malformed dump, not
    // a second call.
    const bool can_pair = it != by_key.end() && it->second.next < it->second.rows.size() &&
                          (fuzzy || it->second.next == 0);
    if (can_pair) {
      row.bench = it->second.rows[it->second.next++];
      bench_used[static_cast<size_t>(row.bench)] = true;
      row.match = MatchKind::kMatched;
      row.metrics = compute_metrics(target.rows[i], bench.rows[static_cast<size_t>(row.bench)]);
    } else {
      row.match = MatchKind::kTargetOnly;
    }
    rows.push_back(std::move(row));
  }
  for (size_t i = 0; i < bench.rows.size(); ++i) {
    if (bench_used[i]) continue;
    CompareRow row;
    row.bench = static_cast<int64_t>(i);
    row.match = MatchKind::kBenchOnly;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace graphprobe::compare
