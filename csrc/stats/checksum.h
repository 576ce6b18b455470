#pragma once
// The per-tensor checksum of summary_mode "md5" (docs/formats.md): a 64-bit
// hash of a tensor's raw bits, exact (a one-ulp change, -0.0 vs 0.0, another
// NaN payload all change the bits) and cheap on any parallel device.
//
// The tensor's elements, in row-major order (a strided tensor hashes as its
// contiguous copy), are read as little-endian unsigned words of the element's
// size (8-byte words for 16-byte elements: two per element); word j with bits
// w contributes mix(w, j), and the checksum is the sum of the contributions
// modulo 2^64:
//
//   mix(w, j) = fmix64(w ^ ((j + 1) * kPositionKey))
//
// fmix64 is MurmurHash3's 64-bit finaliser, a bijection; so for each j, mix
// is a bijection of w: a change confined to one word always changes the
// checksum. Addition modulo 2^64 is associative and commutative, so any
// split into blocks or threads, in any order, gives the same value (the GPU
// kernel folds its blocks with integer atomics and stays deterministic); the
// position in the key makes a reordering of the elements visible.
//
// Header-only and torch-free: the CPU kernel (stats/checksum_cpu.cpp), the
// CUDA kernel (stats/checksum_kernel.cuh) and the tests use one definition.

#include <cstdint>

#if defined(__CUDACC__)
#define GRAPHPROBE_HD __host__ __device__
#else
#define GRAPHPROBE_HD
#endif

namespace graphprobe::checksum {

// 2^64 / golden ratio, odd: consecutive positions get well-spread keys.
inline constexpr uint64_t kPositionKey = 0x9E3779B97F4A7C15ULL;

GRAPHPROBE_HD inline uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDULL;
  k ^= k >> 33;
  k *= 0xC4CEB9FE1A85EC53ULL;
  k ^= k >> 33;
  return k;
}

// The contribution of word j holding bits w.
GRAPHPROBE_HD inline uint64_t mix(uint64_t w, uint64_t j) { return fmix64(w ^ ((j + 1) * kPositionKey)); }

// The word size (bytes) for elements of `element_size` bytes, or 0 where
// there is no checksum (sizes other than 1, 2, 4, 8, 16).
GRAPHPROBE_HD inline int word_bytes(int64_t element_size) {
  switch (element_size) {
    case 1: case 2: case 4: case 8: return static_cast<int>(element_size);
    case 16: return 8;
    default: return 0;
  }
}

}  // namespace graphprobe::checksum
