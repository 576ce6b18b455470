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

// msprobe renumbers backward calls before matching (update_backward_call in
// msprobe/core/compare/acc_compare.py): the n-th backward entry of an
// API/module, counted in dump order, is matched as call n whatever index it
// was written with, so that recomputation (which dumps extra backward calls
// with later indices) does not shift the pairs. Returns the key of each
// entry; forward and parameters_grad entries keep their name.
std::vector<std::string> exact_entry_keys(const Dump& d) {
  std::vector<std::string> keys;
  keys.reserve(d.entries.size());
  std::unordered_map<std::string, size_t> backward_calls;
  for (const std::string& entry : d.entries) {
    auto parts = split_dots(entry);
    const size_t n = parts.size();
    const bool params_grad = (n >= 1 && parts[n - 1] == "parameters_grad") || (n >= 2 && parts[n - 2] == "parameters_grad");
    // msprobe takes the direction from the last two components.
    const bool backward = !params_grad && n > 2 && (parts[n - 1] == "backward" || parts[n - 2] == "backward") &&
                          parts[n - 1] != "forward" && parts[n - 2] != "forward";
    if (!backward) {
      keys.push_back(entry);
      continue;
    }
    const size_t head_len = entry.size() - parts[n - 2].size() - parts[n - 1].size() - 2;
    const std::string head = entry.substr(0, head_len);  // "Functional.conv2d", "Module.fc.Linear"
    const std::string order = std::to_string(backward_calls[head]++);
    std::string key = head;
    for (size_t i = n - 2; i < n; ++i) key += "." + (all_digits(parts[i]) ? order : std::string(parts[i]));
    keys.push_back(std::move(key));
  }
  return keys;
}

// Row key used for pairing: the entry key and the row's part.
std::string key_of(const Dump& d, const std::vector<std::string>& entry_keys, const TensorRecord& r, bool fuzzy) {
  std::string k = fuzzy ? strip_call_index(d.entries[r.entry]) : entry_keys[r.entry];
  k.push_back('.');
  k.append(r.suffix(d.entries));
  return k;
}

// msprobe pairs rows of equal dtype, or both of the float dtypes
// (gen_dtype_condition); other rows are left without a bench.
bool dtypes_pair(const std::string& t, const std::string& b) {
  if (t == b) return true;
  static const char* const kGroups[2][4] = {{"float16", "float32", "float64", "bfloat16"},
                                            {"torch.float16", "torch.float32", "torch.float64", "torch.bfloat16"}};
  for (const auto& group : kGroups) {
    bool tin = false, bin = false;
    for (const char* g : group) {
      tin = tin || t == g;
      bin = bin || b == g;
    }
    if (tin && bin) return true;
  }
  return false;
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
  const std::vector<std::string> target_keys = fuzzy ? std::vector<std::string>() : exact_entry_keys(target);
  const std::vector<std::string> bench_keys = fuzzy ? std::vector<std::string>() : exact_entry_keys(bench);
  for (size_t i = 0; i < bench.rows.size(); ++i)
    by_key[key_of(bench, bench_keys, bench.rows[i], fuzzy)].rows.push_back(static_cast<int64_t>(i));

  std::vector<bool> bench_used(bench.rows.size(), false);
  std::vector<CompareRow> rows;
  rows.reserve(target.rows.size() + 8);
  for (size_t i = 0; i < target.rows.size(); ++i) {
    CompareRow row;
    row.target = static_cast<int64_t>(i);
    auto it = by_key.find(key_of(target, target_keys, target.rows[i], fuzzy));
    // Exact mode pairs a name once: a repeated name is a malformed dump, not
    // a second call.
    const bool can_pair = it != by_key.end() && it->second.next < it->second.rows.size() &&
                          (fuzzy || it->second.next == 0) &&
                          dtypes_pair(target.rows[i].dtype,
                                      bench.rows[static_cast<size_t>(it->second.rows[it->second.next])].dtype);
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
