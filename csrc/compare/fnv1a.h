#pragma once
// FNV-1a, 64 bits: the hash matching orders and groups row keys by. Byte by
// byte, so a key's hash does not depend on where it is split into entry
// and part. Not for anything an adversary picks: callers compare the text
// itself where two hashes are equal. Torch-free.

#include <cstdint>
#include <string_view>

namespace graphprobe::compare {

inline constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL;

inline uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace graphprobe::compare
