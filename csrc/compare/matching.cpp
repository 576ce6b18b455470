#include "compare/matching.h"

#include "compare/call_alignment.h"
#include "compare/fnv1a.h"
#include "compare/hash_groups.h"
#include "compare/hash_order.h"
#include "compare/huge_pages.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <unordered_map>

namespace graphprobe::compare {
bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

namespace {

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

// The last two components of a dotted name, and how many components it
// has, counted up to 3 ("a": "", "a", 1; "a.b": "a", "b", 2; "a.b.c.d":
// "c", "d", 3).
struct LastTwo {
  std::string_view second, last;
  size_t parts;
};

LastTwo last_two(std::string_view s) {
  const size_t d1 = s.rfind('.');
  if (d1 == std::string_view::npos) return {{}, s, 1};
  const size_t d2 = d1 == 0 ? std::string_view::npos : s.rfind('.', d1 - 1);
  if (d2 == std::string_view::npos) return {s.substr(0, d1), s.substr(d1 + 1), 2};
  return {s.substr(d2 + 1, d1 - d2 - 1), s.substr(d1 + 1), 3};
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
    // Only the last two components count: found from the end, with no
    // vector of every component (a few allocations per entry, a fifth of
    // matching).
    const LastTwo t = last_two(entry);
    const bool params_grad = t.last == "parameters_grad" || (t.parts >= 2 && t.second == "parameters_grad");
    // msprobe takes the direction from the last two components.
    const bool backward = !params_grad && t.parts > 2 && (t.last == "backward" || t.second == "backward") &&
                          t.last != "forward" && t.second != "forward";
    if (!backward) {
      keys.push_back(entry);
      continue;
    }
    const size_t head_len = entry.size() - t.second.size() - t.last.size() - 2;
    const std::string head = entry.substr(0, head_len);  // "Functional.conv2d", "Module.fc.Linear"
    const std::string order = std::to_string(backward_calls[head]++);
    std::string key = head;
    for (const std::string_view part : {t.second, t.last}) key += "." + (all_digits(part) ? order : std::string(part));
    keys.push_back(std::move(key));
  }
  return keys;
}

// A row's key, head + "." + tail (the entry key and the row's part),
// compared as that string without building it.
struct RowKey {
  std::string_view head, tail;
};

bool key_less(const RowKey& a, const RowKey& b) {
  const std::string_view pa[3] = {a.head, ".", a.tail}, pb[3] = {b.head, ".", b.tail};
  size_t ia = 0, ib = 0, oa = 0, ob = 0;  // segment and offset in it
  while (true) {
    while (ia < 3 && oa == pa[ia].size()) ++ia, oa = 0;
    while (ib < 3 && ob == pb[ib].size()) ++ib, ob = 0;
    if (ia == 3 || ib == 3) return ia == 3 && ib != 3;
    const size_t n = std::min(pa[ia].size() - oa, pb[ib].size() - ob);
    const int c = pa[ia].substr(oa, n).compare(pb[ib].substr(ob, n));
    if (c != 0) return c < 0;
    oa += n;
    ob += n;
  }
}

}  // namespace

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

std::vector<CompareRow> match_rows(const Dump& target, const Dump& bench, bool fuzzy,
                                   std::vector<std::string>* notes) {
  // Bench rows sorted by a 64-bit hash of their key, bench order kept within
  // a hash; a binary search finds a target row's candidates and `taken` (per
  // key, at the key's first position) walks them. Sorting by whole keys
  // compared as strings took a third of a compare (long entry names share
  // long prefixes); a hash orders them at the cost of 8 bytes per bench row
  // while matching. Should two different keys share a hash, the rows are
  // sorted by the keys themselves instead, as before: the pairs are the same.
  const size_t n = bench.rows.size();
  auto heads = [fuzzy](const Dump& d) {
    if (!fuzzy) return exact_entry_keys(d);
    std::vector<std::string> out;
    out.reserve(d.entries.size());
    for (const std::string& e : d.entries) out.push_back(strip_call_index(e));
    return out;
  };
  const std::vector<std::string> target_heads = heads(target), bench_heads = heads(bench);
  auto key = [](const Dump& d, const std::vector<std::string>& h, const TensorRecord& r) {
    return RowKey{h[r.entry], r.suffix(d.entries)};
  };
  // The hash of head + "." + tail, the head's part computed once per entry.
  auto head_hashes = [](const std::vector<std::string>& h) {
    std::vector<uint64_t> out(h.size());
    for (size_t e = 0; e < h.size(); ++e) out[e] = fnv1a(fnv1a(kFnvBasis, h[e]), ".");
    return out;
  };
  const std::vector<uint64_t> target_head_hash = head_hashes(target_heads), bench_head_hash = head_hashes(bench_heads);
  auto row_hash = [](const Dump& d, const std::vector<uint64_t>& hh, const TensorRecord& r) {
    return fnv1a(hh[r.entry], r.suffix(d.entries));
  };
  std::vector<uint64_t> hash(n);
  for (size_t i = 0; i < n; ++i) hash[i] = row_hash(bench, bench_head_hash, bench.rows[i]);
  HashOrder by_hash_order = order_by_hash(hash);  // (hash, place): bench order within a hash
  std::vector<uint32_t> order = std::move(by_hash_order.order);
  auto key_equal = [](const RowKey& a, const RowKey& b) {
    if (a.head.size() + a.tail.size() != b.head.size() + b.tail.size()) return false;
    if (a.head.size() == b.head.size()) return a.head == b.head && a.tail == b.tail;
    return !key_less(a, b) && !key_less(b, a);  // the same text split at another dot
  };
  bool by_hash = true;
  for (size_t i = 1; i < n && by_hash; ++i)
    by_hash = by_hash_order.sorted_hash[i] != by_hash_order.sorted_hash[i - 1] ||
              key_equal(key(bench, bench_heads, bench.rows[order[i]]), key(bench, bench_heads, bench.rows[order[i - 1]]));
  if (!by_hash) {
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return key_less(key(bench, bench_heads, bench.rows[a]), key(bench, bench_heads, bench.rows[b]));
    });
  }
  // By hash: the sorted hashes side by side, and each hash's first place
  // in them through a table. Two binary searches per target row over
  // `order` (each step two reads far apart) took most of the matching.
  // Both sides mostly list the same rows in the same order, so the bench
  // row after the last one paired is tried first: its hash, place in
  // `order` and whether its hash is its own are read in bench order, not
  // from all over memory.
  std::vector<uint64_t> sorted_hash;
  std::vector<uint32_t> place;  // bench row -> its place in order
  std::vector<bool> alone;      // bench row: no other row shares its hash
  HashGroups groups;
  if (by_hash) {
    sorted_hash = std::move(by_hash_order.sorted_hash);
    place.resize(n);
    alone.assign(n, false);
    for (size_t i = 0; i < n; ++i) place[order[i]] = static_cast<uint32_t>(i);
    for (size_t i = 0; i < n; ++i)
      alone[order[i]] = (i == 0 || sorted_hash[i - 1] != sorted_hash[i]) && (i + 1 == n || sorted_hash[i + 1] != sorted_hash[i]);
    groups = HashGroups(sorted_hash);
  }
  // The bench rows whose key is the target row's: `count` places of order
  // from `first`, the first of them bench row `row`.
  struct Candidates {
    size_t first = 0, count = 0;
    uint32_t row = 0;
  };
  size_t guess = 0;  // the bench row after the last one paired
  auto candidates = [&](const TensorRecord& t) -> Candidates {
    const RowKey k = key(target, target_heads, t);
    if (by_hash) {
      const uint64_t h = row_hash(target, target_head_hash, t);
      Candidates c;
      if (guess < n && hash[guess] == h && alone[guess]) {
        c = {place[guess], 1, static_cast<uint32_t>(guess)};
      } else {
        const size_t first = groups.find(sorted_hash, h);
        if (first == HashGroups::npos) return {};
        size_t last = first + 1;
        while (last < n && sorted_hash[last] == h) ++last;
        c = {first, last - first, order[first]};
      }
      if (!key_equal(k, key(bench, bench_heads, bench.rows[c.row]))) c.count = 0;
      return c;
    }
    auto lo = std::partition_point(order.begin(), order.end(), [&](uint32_t b) {
      return key_less(key(bench, bench_heads, bench.rows[b]), k);
    });
    auto hi = std::partition_point(lo, order.end(), [&](uint32_t b) {
      return !key_less(k, key(bench, bench_heads, bench.rows[b]));
    });
    if (lo == hi) return {};
    return {static_cast<size_t>(lo - order.begin()), static_cast<size_t>(hi - lo), *lo};
  };
  // Rows of each key paired so far, at the key's first bench row.
  std::vector<uint32_t> taken(n, 0);

  std::vector<bool> bench_used(bench.rows.size(), false);
  std::vector<CompareRow> rows;
  // Room for every row there can be: growing would briefly hold two copies;
  // the pages of rows never written are never touched.
  rows.reserve(target.rows.size() + bench.rows.size());
  advise_huge_pages(rows.data(), rows.capacity() * sizeof(CompareRow));
  for (size_t i = 0; i < target.rows.size(); ++i) {
    CompareRow row;
    row.target = static_cast<int64_t>(i);
    const Candidates c = candidates(target.rows[i]);
    // Exact mode pairs a name once: a repeated name is a malformed dump, not
    // a second call.
    const uint32_t done = c.count ? taken[c.row] : 0;
    const uint32_t next = c.count == 0 ? 0 : done == 0 ? c.row : order[c.first + done];
    const bool can_pair = c.count > 0 && done < c.count && (fuzzy || done == 0) &&
                          dtypes_pair(target.rows[i].dtype, bench.rows[next].dtype);
    if (can_pair) {
      ++taken[c.row];
      row.bench = next;
      guess = static_cast<size_t>(next) + 1;
      bench_used[next] = true;
      row.match = MatchKind::kMatched;
      row.metrics = compute_metrics(target.rows[i], bench.rows[next]);
    } else {
      row.match = MatchKind::kTargetOnly;
    }
    rows.push_back(std::move(row));
  }
  if (!fuzzy) align_unpaired_calls(target, bench, rows, bench_used, notes);
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
