#pragma once
// The random-projection statistic "Sketch" (docs/formats.md): four sums of
// the tensor's elements, each element taken with a fixed pseudo-random sign.
//
// Why: Max, Min, Mean and Norm stay put when a tensor's values are
// redistributed (a softmax scale that sharpens one row and flattens another,
// a rounding that moves each element by an ulp either way); a signed sum
// does not. For independent random signs, E[(sum_i s_i d_i)^2] = |d|^2, so
// the root mean square of the four sums' differences estimates the L2 norm
// of the difference between two tensors, and divided by the Norm it is their
// relative L2 error -- the quantity a precision engineer would compute from
// the full tensors, here from 32 bytes per record.
//
// The signs: the tensor's elements in row-major order (a strided tensor as
// its contiguous copy), element i in group g = i / 16 at lane l = i % 16;
// one 64-bit hash per group,
//
//   h(g) = fmix64((g + 1) * kSketchKey),
//
// gives 64 sign bits, four per lane: projection k takes element i with
// sign -1 when bit 4 * l + k of h(g) is set, else +1. One hash per 16
// elements keeps the cost to a few integer operations per 16 elements;
// fmix64 (MurmurHash3's finaliser, the checksum's mixer) spreads every bit
// of g over the 64 bits, so that neighbouring groups get unrelated signs.
//
// Header-only and torch-free: the CPU kernel (stats/sketch_cpu.cpp), the
// CUDA kernel (stats/stats_kernel.cuh), the ATen path (stats/stats_aten.cpp)
// and the tests use one definition.

#include <cstdint>

#include "stats/checksum.h"

namespace graphprobe::sketch {

// Projections per tensor: four keep the estimate within a factor 0.27 to 1.8
// of the true relative L2 error with 98 % probability (chi-squared with four
// degrees of freedom), for 32 bytes per record.
inline constexpr int kProjections = 4;
inline constexpr int kGroup = 16;  // elements per hash: 16 lanes x 4 bits = 64 bits

// An odd constant other than the checksum's position key, so that the signs
// and the checksum's mixing are unrelated.
inline constexpr uint64_t kSketchKey = 0xD1B54A32D192ED03ULL;

GRAPHPROBE_HD inline uint64_t group_bits(uint64_t group) { return checksum::fmix64((group + 1) * kSketchKey); }

// The four sign bits of lane l (0..15) of a group's hash, bit k for
// projection k (1 = negative).
GRAPHPROBE_HD inline unsigned lane_bits(uint64_t bits, int lane) {
  return static_cast<unsigned>(bits >> (4 * lane)) & 0xFu;
}

}  // namespace graphprobe::sketch
