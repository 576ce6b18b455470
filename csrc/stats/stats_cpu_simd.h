#pragma once
// Vectorised single-pass statistics for float32, bfloat16 and float16,
// selected at run time: AVX-512 where the CPU and the OS run it, else AVX2
// (+FMA, F16C), else none (the portable double loop of stats_cpu.cpp serves).
// Sums accumulate in float32 per short block and in double across blocks
// (simd_block_reduce.h says why and what precision that gives).

#include <cstdint>

#include "stats/stats_cpu.h"

namespace graphprobe::simd {

// The widest vector instructions the kernels use on this CPU: "avx512",
// "avx2" or "none". The environment variable GRAPHPROBE_SIMD caps it
// (none, avx2 or avx512; tests compare the paths); GRAPHPROBE_NO_SIMD=1 is
// GRAPHPROBE_SIMD=none.
const char* level();

// Whether any vectorised kernel runs here (level() is not "none").
bool available();

// Each reduces data[0, n) with the level() kernel (callers check
// available()); NaNs are counted and left out of max/min.
Row reduce_f32(const float* data, int64_t n);
Row reduce_bf16(const uint16_t* bits, int64_t n);
Row reduce_f16(const uint16_t* bits, int64_t n);

// The Sketch's signed sums (stats/sketch.h) of `groups` whole groups of 16
// elements, the first being group `first_group` of the tensor, added to
// out[0..3] (float32 per block of 256 elements, double across blocks).
void sketch_f32(const float* data, uint64_t first_group, int64_t groups, double out[4]);
void sketch_bf16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]);
void sketch_f16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]);

}  // namespace graphprobe::simd
