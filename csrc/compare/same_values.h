#pragma once
// "The same values recorded again": two records of one side whose dtype,
// shape, four statistics and Sketch agree bit for bit hold, for floating data
// with a Norm above 0, the same tensor (a module's output that is its last
// child's output; a value an API call returned and its module returned
// again). Where the bench has that and the target's two records differ,
// whatever came between them changed the value on the target only: a
// divergence whatever the floors (docs/formats.md, "The same values recorded
// again"). Torch-free.

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>

#include "compare/result.h"

namespace graphprobe::compare {

// A 64-bit hash of what same_values compares (collisions are checked there).
inline uint64_t values_hash(const TensorRecord& r, const std::array<double, 4>* sketch) {
  uint64_t h = std::hash<std::string_view>{}(r.dtype);
  auto mix = [&h](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  for (int64_t d : r.shape) mix(static_cast<uint64_t>(d));
  for (int s = 0; s < kNumStats; ++s) {
    const double v = r.stats[s] ? *r.stats[s] : 0.0;
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    mix(r.stats[s] ? bits : 0x5bd1e995ULL);
  }
  if (sketch)
    for (double v : *sketch) {
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof v);
      mix(bits);
    }
  return h;
}

// Whether a and b hold the same values: dtype, shape, the four statistics
// (present alike, bit for bit) and the Sketch (both absent or bit for bit).
inline bool same_values(const TensorRecord& a, const std::array<double, 4>* sa, const TensorRecord& b, const std::array<double, 4>* sb) {
  if (a.dtype != b.dtype || a.shape != b.shape || (sa == nullptr) != (sb == nullptr)) return false;
  for (int s = 0; s < kNumStats; ++s) {
    if (static_cast<bool>(a.stats[s]) != static_cast<bool>(b.stats[s])) return false;
    if (!a.stats[s]) continue;
    const double x = *a.stats[s], y = *b.stats[s];
    if (std::memcmp(&x, &y, sizeof x) != 0) return false;
  }
  return sa == nullptr || std::memcmp(sa->data(), sb->data(), sizeof(double) * 4) == 0;
}

}  // namespace graphprobe::compare
