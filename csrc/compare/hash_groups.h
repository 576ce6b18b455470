#pragma once
// Where each hash starts in a sorted list of 64-bit hashes: an open-addressing
// table, so that matching finds a key's bench rows in one probe or two
// instead of a binary search. Torch-free.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace graphprobe::compare {

class HashGroups {
 public:
  static constexpr size_t npos = static_cast<size_t>(-1);

  HashGroups() = default;
  // `sorted`: ascending; it must outlive the lookups and stay unchanged.
  explicit HashGroups(const std::vector<uint64_t>& sorted) {
    size_t cap = 16;
    while (cap < 2 * sorted.size()) cap <<= 1;  // at most half full: short probes
    mask_ = cap - 1;
    slots_.assign(cap, 0);
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (i > 0 && sorted[i] == sorted[i - 1]) continue;  // the group's first place only
      size_t s = slot(sorted[i]);
      while (slots_[s] != 0) s = (s + 1) & mask_;
      slots_[s] = static_cast<uint32_t>(i + 1);
    }
  }

  // The first place of `h` in `sorted`, npos when it is not there.
  size_t find(const std::vector<uint64_t>& sorted, uint64_t h) const {
    if (slots_.empty()) return npos;
    for (size_t s = slot(h);; s = (s + 1) & mask_) {
      const uint32_t v = slots_[s];
      if (v == 0) return npos;
      if (sorted[v - 1] == h) return v - 1;
    }
  }

 private:
  // The hashes are FNV-1a: mixed again, so that the table's low bits are
  // spread whatever the keys share.
  size_t slot(uint64_t h) const { return static_cast<size_t>((h * 0x9e3779b97f4a7c15ULL) >> 32) & mask_; }

  std::vector<uint32_t> slots_;  // place + 1 in sorted; 0: empty
  size_t mask_ = 0;
};

}  // namespace graphprobe::compare
