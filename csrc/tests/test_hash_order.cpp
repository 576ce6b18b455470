// order_by_hash (compare/hash_order.h) against std::stable_sort of the
// places by hash: matching pairs rows by this order, so it must be exactly
// that order, equal hashes in ascending place, whatever the hashes are.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compare/fnv1a.h"
#include "compare/hash_order.h"
#include "tests/check.h"

namespace gc = graphprobe::compare;

namespace {

void same_as_stable_sort(const std::vector<uint64_t>& hash, const char* what) {
  std::vector<uint32_t> want(hash.size());
  std::iota(want.begin(), want.end(), 0u);
  std::stable_sort(want.begin(), want.end(), [&](uint32_t a, uint32_t b) { return hash[a] < hash[b]; });
  const gc::HashOrder got = gc::order_by_hash(hash);
  bool same = got.order == want && got.sorted_hash.size() == hash.size();
  for (size_t i = 0; same && i < want.size(); ++i) same = got.sorted_hash[i] == hash[want[i]];
  if (!same) ::graphprobe::test::fail(__FILE__, __LINE__, std::string("order_by_hash differs from stable_sort: ") + what +
                                                             " (n = " + std::to_string(hash.size()) + ")");
}

void run_all() {
  std::mt19937_64 rng(38);
  same_as_stable_sort({}, "empty");
  same_as_stable_sort({42}, "one");
  same_as_stable_sort({~uint64_t{0}, 0, ~uint64_t{0}, 0}, "extremes, repeated");
  for (size_t n : {2, 3, 15, 16, 17, 100, 1000, 4097, 100000, 300000}) {
    std::vector<uint64_t> h(n);
    for (auto& x : h) x = rng();
    same_as_stable_sort(h, "random");
    // Few distinct values: long runs of equal hashes in every bucket.
    for (auto& x : h) x = rng() % 7 * 0x9e3779b97f4a7c15ULL;
    same_as_stable_sort(h, "7 distinct values");
    // One bucket for all (top bits equal), distinct below: the long-bucket sort.
    for (auto& x : h) x = rng() >> 30;
    same_as_stable_sort(h, "equal top bits");
    // Short buckets with equal hashes among them (the insertion sort's ties).
    for (auto& x : h) x = (rng() % (n / 2 + 1)) << 40;
    same_as_stable_sort(h, "pairs of equal hashes");
    std::fill(h.begin(), h.end(), uint64_t{0x1234});
    same_as_stable_sort(h, "all equal");
    // Descending: every insertion moves to the bucket's front.
    for (size_t i = 0; i < n; ++i) h[i] = ~uint64_t{0} - i;
    same_as_stable_sort(h, "descending");
  }
  // FNV-1a of row keys, as matching hashes them, with repeated keys.
  std::vector<uint64_t> h;
  for (int i = 0; i < 200000; ++i) {
    const std::string key = "Module.layers." + std::to_string(i % 64) + ".block" + std::to_string(i / 64 % 3000) +
                            ".Linear.forward.0.output." + std::to_string(i % 3);
    h.push_back(gc::fnv1a(gc::kFnvBasis, key));
  }
  same_as_stable_sort(h, "FNV-1a of row keys");
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run_all)
