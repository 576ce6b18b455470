#pragma once
// A record's identity as "the same values, recorded again": its dtype, its
// number of elements and the four statistics' bits. Two records of different
// tensors that agree in all of them are, for floating data, the same values
// (a parameter read by an API call and by its module; a gradient passed on
// from one backward call to the next, perhaps through a view or reshape that
// is not recorded: hence the number of elements, not the shape). Torch-free.

#include <cmath>
#include <string>

#include "compare/result.h"

namespace graphprobe::compare {

inline std::string fingerprint(const TensorRecord& b) {
  std::string key = b.dtype;
  key.push_back('|');
  int64_t numel = 1;
  for (int64_t d : b.shape) numel *= d;
  key.append(reinterpret_cast<const char*>(&numel), sizeof(numel));
  key.push_back('|');
  for (int s = 0; s < kNumStats; ++s) {
    const double v = b.stats[s] ? *b.stats[s] : std::nan("");
    key.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  return key;
}

}  // namespace graphprobe::compare
