#pragma once
// The places 0..n-1 ordered by a 64-bit hash, equal hashes in ascending
// place: the order matching walks the bench rows in. Torch-free.

#include <cstdint>
#include <vector>

namespace graphprobe::compare {

struct HashOrder {
  std::vector<uint32_t> order;        // places, by (hash, place)
  std::vector<uint64_t> sorted_hash;  // hash[order[i]], ascending
};

// `hash` holds fewer than 2^32 values. The same order as
// std::stable_sort of the places by hash, found by one pass that scatters
// the places into buckets of their hash's top bits (as many buckets as
// places, rounded to a power of two) and a sort of each bucket: the hashes
// are FNV-1a, spread evenly, so a bucket holds a few places. Sorting the
// places with a comparison that looked each hash up (std::sort) was ~2 %
// of a compare: log2(n) passes of reads all over `hash`.
HashOrder order_by_hash(const std::vector<uint64_t>& hash);

}  // namespace graphprobe::compare
