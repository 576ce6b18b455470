#include "compare/call_alignment.h"

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "compare/matching.h"
#include "compare/metrics.h"

namespace graphprobe::compare {
namespace {

// An entry name split around its call index: "Tensor.__add__" + ".forward"
// ("Tensor.__add__.7.forward"), "Module.fc.Linear.forward" + ""
// ("Module.fc.Linear.forward.0"). `indexed` is false for a name without one.
struct CallHead {
  std::string_view before, after;
  bool indexed = false;
  bool first_call = false;  // call index 0

  uint64_t hash() const {
    const std::hash<std::string_view> h;
    return h(before) * 0x9E3779B97F4A7C15ULL ^ h(after);
  }
  std::string text() const { return std::string(before) + std::string(after); }
  bool operator==(const CallHead& o) const { return before == o.before && after == o.after; }
};

CallHead call_head(std::string_view entry) {
  const size_t d1 = entry.rfind('.');
  if (d1 == std::string_view::npos || d1 == 0) return {};
  const size_t d2 = entry.rfind('.', d1 - 1);
  if (d2 == std::string_view::npos) return {};
  const std::string_view last = entry.substr(d1 + 1), second = entry.substr(d2 + 1, d1 - d2 - 1);
  const bool last_dir = last == "forward" || last == "backward";
  const bool second_dir = second == "forward" || second == "backward";
  if (last_dir && all_digits(second)) return {entry.substr(0, d2), entry.substr(d1), true, second == "0"};
  if (second_dir && all_digits(last)) return {entry.substr(0, d1), {}, true, last == "0"};
  return {};
}

// [begin, end) of an entry's records in a dump (its rows are sorted by entry).
std::pair<size_t, size_t> records_of(const Dump& d, uint32_t entry) {
  const auto by_entry = [](const TensorRecord& r, uint32_t e) { return r.entry < e; };
  const auto lo = std::lower_bound(d.rows.begin(), d.rows.end(), entry, by_entry);
  auto hi = lo;
  while (hi != d.rows.end() && hi->entry == entry) ++hi;
  return {static_cast<size_t>(lo - d.rows.begin()), static_cast<size_t>(hi - d.rows.begin())};
}

// Two records that could hold the same value: the same part of their call,
// dtypes exact matching would pair, equal shapes.
bool same_record_kind(const Dump& target, const TensorRecord& x, const Dump& bench, const TensorRecord& y) {
  return x.suffix(target.entries) == y.suffix(bench.entries) && x.is_tensor == y.is_tensor &&
         dtypes_pair(x.dtype, y.dtype) && x.shape == y.shape &&
         std::string_view(x.shape_text) == std::string_view(y.shape_text);
}

// Two calls whose records could be the same computation, record by record.
bool same_kind(const Dump& target, std::pair<size_t, size_t> t, const Dump& bench, std::pair<size_t, size_t> b) {
  if (t.second - t.first != b.second - b.first) return false;
  for (size_t k = 0; k < t.second - t.first; ++k)
    if (!same_record_kind(target, target.rows[t.first + k], bench, bench.rows[b.first + k])) return false;
  return true;
}

// Calls of one head on each side, in dump order.
struct Calls {
  CallHead head;
  std::vector<uint32_t> target, bench;
};

using Ranges = std::vector<std::pair<size_t, size_t>>;

// At most this many calls are skipped to find a call's partner: an API
// called a hundred thousand times on each side must not cost their product.
constexpr size_t kMaxSkip = 64;

// (target call, bench call) pairs, in order; `tr` and `br`: each call's
// records (records_of).
std::vector<std::pair<size_t, size_t>> align(const Dump& target, const Dump& bench, const Ranges& tr,
                                             const Ranges& br) {
  const size_t nt = tr.size(), nb = br.size();
  const size_t skip = std::min(kMaxSkip, (nt > nb ? nt - nb : nb - nt) + 1);
  auto fits = [&](size_t i, size_t j) { return same_kind(target, tr[i], bench, br[j]); };
  std::vector<std::pair<size_t, size_t>> pairs;
  size_t i = 0, j = 0;
  while (i < nt && j < nb) {
    if (fits(i, j)) {
      pairs.emplace_back(i++, j++);
      continue;
    }
    // The nearest partner on either side, the longer side's calls skipped
    // first (the extra calls are there).
    bool found = false;
    for (size_t k = 1; k <= skip && !found; ++k) {
      const bool try_target = i + k < nt && fits(i + k, j), try_bench = j + k < nb && fits(i, j + k);
      if (try_target && (!try_bench || nt >= nb)) i += k, found = true;
      else if (try_bench) j += k, found = true;
    }
    if (!found) ++i, ++j;  // neither has a partner near: both left unpaired
  }
  return pairs;
}

}  // namespace

void align_unpaired_calls(const Dump& target, const Dump& bench, std::vector<CompareRow>& rows,
                          std::vector<bool>& bench_used, std::vector<std::string>* notes) {
  // The heads of calls with a row left unpaired that may have calls on the
  // other side: a later call (index > 0: its side calls the API more than
  // once), or a first call unpaired on both sides. A first call unpaired on
  // one side only has no namesake there: the other side never calls the API
  // (a dump that ends earlier; compare's benchmark has 37k such entries, and
  // looking every entry up for them cost a third of matching). None: done.
  std::unordered_set<uint64_t> heads, first_target;
  const bool bench_unpaired = std::find(bench_used.begin(), bench_used.end(), false) != bench_used.end();
  uint32_t last = UINT32_MAX;
  for (const CompareRow& r : rows) {
    if (r.match != MatchKind::kTargetOnly) continue;
    const uint32_t e = target.rows[static_cast<size_t>(r.target)].entry;
    if (e == last) continue;
    last = e;
    const CallHead h = call_head(target.entries[e]);
    if (!h.indexed) continue;
    if (!h.first_call) heads.insert(h.hash());
    else if (bench_unpaired) first_target.insert(h.hash());
  }
  last = UINT32_MAX;
  for (size_t i = 0; i < bench.rows.size(); ++i) {
    if (bench_used[i] || bench.rows[i].entry == last) continue;
    last = bench.rows[i].entry;
    if (const CallHead h = call_head(bench.entries[last]); h.indexed && (!h.first_call || first_target.count(h.hash())))
      heads.insert(h.hash());
  }
  if (heads.empty()) return;
  // records_of() finds a call's records by binary search: the readers list
  // them entry by entry; anything else is left as exact matching paired it.
  const auto by_entry = [](const TensorRecord& a, const TensorRecord& b) { return a.entry < b.entry; };
  if (!std::is_sorted(target.rows.begin(), target.rows.end(), by_entry) ||
      !std::is_sorted(bench.rows.begin(), bench.rows.end(), by_entry))
    return;
  // A bit per hash's low bits: most entries' heads are not among them.
  auto seen = std::make_unique<std::bitset<1 << 16>>();
  for (const uint64_t h : heads) seen->set(h & 0xFFFF);
  std::unordered_map<uint64_t, Calls> calls;
  auto collect = [&](const Dump& d, bool is_target) {
    for (uint32_t e = 0; e < d.entries.size(); ++e) {
      const CallHead h = call_head(d.entries[e]);
      if (!h.indexed) continue;
      const uint64_t key = h.hash();
      if (!seen->test(key & 0xFFFF) || !heads.count(key)) continue;
      Calls& c = calls[key];
      if (c.target.empty() && c.bench.empty()) c.head = h;
      if (!(c.head == h)) continue;  // another head with the same hash: left as exact matching paired it
      (is_target ? c.target : c.bench).push_back(e);
    }
  };
  collect(target, true);
  collect(bench, false);

  // Target rows are in target order, one per record: rows[i].target == i.
  std::vector<const Calls*> changed;
  for (const auto& [key, c] : calls) {
    // The same count: the calls pair by index, as exact matching paired
    // them (a call whose mask input changed dtype stays paired, its rows
    // judged one by one).
    if (c.target.empty() || c.bench.empty() || c.target.size() == c.bench.size()) continue;
    Ranges tr(c.target.size()), br(c.bench.size());
    for (size_t i = 0; i < tr.size(); ++i) tr[i] = records_of(target, c.target[i]);
    for (size_t j = 0; j < br.size(); ++j) br[j] = records_of(bench, c.bench[j]);
    const std::vector<std::pair<size_t, size_t>> pairs = align(target, bench, tr, br);
    // Kept only where it pairs more records alike than exact matching did:
    // a call recorded in two parts on one side (inputs in one entry, outputs
    // in the next: GraniteMoE's router under inductor) has no partner of its
    // kind, and exact matching at least paired its inputs.
    size_t exact_alike = 0, aligned_alike = 0;
    for (const auto& [tb, te] : tr) {
      for (size_t k = tb; k < te; ++k)
        if (rows[k].bench >= 0 &&
            same_record_kind(target, target.rows[k], bench, bench.rows[static_cast<size_t>(rows[k].bench)]))
          ++exact_alike;
    }
    for (const auto& [i, j] : pairs) aligned_alike += tr[i].second - tr[i].first;
    if (aligned_alike <= exact_alike) continue;
    for (const auto& [tb, te] : tr) {
      for (size_t k = tb; k < te; ++k) {
        if (rows[k].bench >= 0) bench_used[static_cast<size_t>(rows[k].bench)] = false;
        rows[k].bench = -1;
        rows[k].match = MatchKind::kTargetOnly;
        rows[k].metrics = Metrics{};
      }
    }
    for (const auto& [i, j] : pairs) {
      const auto [tb, te] = tr[i];
      const size_t bb = br[j].first;
      for (size_t k = tb; k < te; ++k) {
        const size_t b = bb + (k - tb);
        rows[k].bench = static_cast<int64_t>(b);
        rows[k].match = MatchKind::kMatched;
        rows[k].metrics = compute_metrics(target.rows[k], bench.rows[b]);
        bench_used[b] = true;
      }
    }
    changed.push_back(&c);
  }
  if (notes == nullptr || changed.empty()) return;
  // The notes in target order of the heads' first calls: the same text for
  // the same dumps, whatever the map's order.
  std::sort(changed.begin(), changed.end(), [](const Calls* a, const Calls* b) { return a->target[0] < b->target[0]; });
  constexpr size_t kMaxNotes = 5;
  for (size_t n = 0; n < changed.size() && n < kMaxNotes; ++n) {
    const Calls& c = *changed[n];
    notes->push_back(target.source + ": " + c.head.text() + ": " + std::to_string(c.target.size()) +
                     " calls in the target, " + std::to_string(c.bench.size()) +
                     " in the bench; the programs differ, so these calls are paired in order by their records' "
                     "dtypes and shapes instead of by call index (docs/formats.md, \"Matching\")");
  }
  if (changed.size() > kMaxNotes)
    notes->push_back(target.source + ": ... and " + std::to_string(changed.size() - kMaxNotes) +
                     " more APIs or modules paired the same way");
}

}  // namespace graphprobe::compare
