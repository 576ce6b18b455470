#include "compare/matching.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

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

// Compares bench row indices (through their keys) with a key, both ways.
template <typename KeyOf>
struct KeyLess {
  const KeyOf& key_of;
  bool operator()(uint32_t a, std::string_view k) const { return key_of(a) < k; }
  bool operator()(std::string_view k, uint32_t a) const { return k < key_of(a); }
};
template <typename KeyOf>
KeyLess(const KeyOf&) -> KeyLess<KeyOf>;

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
  // Bench rows sorted by key, bench order kept within a key; a binary search
  // finds a target row's candidates and `taken` (per key, at the key's first
  // position) walks them. 8 bytes per bench row in exact mode, where a hash
  // map of key copies took ~190 at the peak of a large compare.
  const size_t n = bench.rows.size();
  std::vector<std::string> fuzzy_keys;
  if (fuzzy) {
    fuzzy_keys.reserve(n);
    for (const TensorRecord& r : bench.rows) fuzzy_keys.push_back(key_of(bench, r, true));
  }
  auto bench_key = [&](uint32_t i) -> std::string_view { return fuzzy ? fuzzy_keys[i] : bench.rows[i].name; };
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return bench_key(a) < bench_key(b); });
  std::vector<uint32_t> taken(n, 0);

  std::vector<bool> bench_used(bench.rows.size(), false);
  std::vector<CompareRow> rows;
  // Room for every row there can be: growing would briefly hold two copies;
  // the pages of rows never written are never touched.
  rows.reserve(target.rows.size() + bench.rows.size());
  for (size_t i = 0; i < target.rows.size(); ++i) {
    CompareRow row;
    row.target = static_cast<int64_t>(i);
    const std::string fuzzy_key = fuzzy ? key_of(target, target.rows[i], true) : std::string();
    const std::string_view key = fuzzy ? std::string_view(fuzzy_key) : std::string_view(target.rows[i].name);
    const auto [lo, hi] = std::equal_range(order.begin(), order.end(), key, KeyLess{bench_key});
    const size_t group = static_cast<size_t>(lo - order.begin());
    // Exact mode pairs a name once: a repeated name is a malformed dump, not
    // a second call.
    const bool can_pair = lo != hi && taken[group] < static_cast<size_t>(hi - lo) && (fuzzy || taken[group] == 0);
    if (can_pair) {
      row.bench = order[group + taken[group]++];
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
