#include "compare/hash_order.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace graphprobe::compare {

HashOrder order_by_hash(const std::vector<uint64_t>& hash) {
  const size_t n = hash.size();
  if (n >= (size_t{1} << 32)) throw std::length_error("order_by_hash: more than 2^32 - 1 hashes");
  HashOrder out;
  out.order.resize(n);
  out.sorted_hash.resize(n);
  if (n == 0) return out;
  // 2^bits buckets, about one per place (at least 2, at most 2^22: the
  // counts stay a few MB whatever n is).
  const int bits = std::clamp(static_cast<int>(std::bit_width(n)), 1, 22);
  const int shift = 64 - bits;
  std::vector<uint32_t> start((size_t{1} << bits) + 1, 0);
  for (uint64_t h : hash) ++start[(h >> shift) + 1];
  for (size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
  // Places in ascending order into their buckets: each bucket is then in
  // place order, which the sort below keeps among equal hashes.
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t at = fill[hash[i] >> shift]++;
    out.order[at] = static_cast<uint32_t>(i);
    out.sorted_hash[at] = hash[i];
  }
  // Each bucket by (hash, place): insertion sort while it is short (the
  // usual case), a sort of (hash, place) pairs when it is not (many places
  // of one hash: a dump that repeats a row's key).
  std::vector<std::pair<uint64_t, uint32_t>> long_bucket;
  for (size_t b = 0; b + 1 < start.size(); ++b) {
    const uint32_t lo = start[b], hi = start[b + 1];
    if (hi - lo < 2) continue;
    if (hi - lo <= 16) {
      for (uint32_t i = lo + 1; i < hi; ++i) {
        const uint64_t h = out.sorted_hash[i];
        const uint32_t p = out.order[i];
        uint32_t j = i;
        // Places are ascending within the bucket before this sort, so a
        // strict comparison of hashes keeps equal hashes in place order.
        for (; j > lo && out.sorted_hash[j - 1] > h; --j) {
          out.sorted_hash[j] = out.sorted_hash[j - 1];
          out.order[j] = out.order[j - 1];
        }
        out.sorted_hash[j] = h;
        out.order[j] = p;
      }
      continue;
    }
    long_bucket.clear();
    for (uint32_t i = lo; i < hi; ++i) long_bucket.emplace_back(out.sorted_hash[i], out.order[i]);
    std::sort(long_bucket.begin(), long_bucket.end());
    for (uint32_t i = lo; i < hi; ++i) {
      out.sorted_hash[i] = long_bucket[i - lo].first;
      out.order[i] = long_bucket[i - lo].second;
    }
  }
  return out;
}

}  // namespace graphprobe::compare
