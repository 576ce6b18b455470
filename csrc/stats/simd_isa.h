#pragma once
// The per-ISA instances of the block statistics (simd_block_reduce.h), each
// compiled for its own target in its own file; stats_cpu_simd.cpp picks one
// at run time. None of them counts NaNs (see stats_cpu_simd.h).

#include <cstdint>

#include "stats/stats_cpu.h"

namespace graphprobe::simd {

namespace avx2 {
Row reduce_f32(const float* data, int64_t n);
Row reduce_bf16(const uint16_t* bits, int64_t n);
Row reduce_f16(const uint16_t* bits, int64_t n);
// The Sketch's four signed sums (stats/sketch.h) of `groups` whole groups of
// 16 elements starting at group `first_group`, added to out[0..3].
void sketch_f32(const float* data, uint64_t first_group, int64_t groups, double out[4]);
void sketch_bf16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]);
void sketch_f16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]);
}  // namespace avx2

namespace avx512 {
Row reduce_f32(const float* data, int64_t n);
Row reduce_bf16(const uint16_t* bits, int64_t n);
Row reduce_f16(const uint16_t* bits, int64_t n);
// The Sketch's four signed sums (stats/sketch.h) of `groups` whole groups of
// 16 elements starting at group `first_group`, added to out[0..3].
void sketch_f32(const float* data, uint64_t first_group, int64_t groups, double out[4]);
void sketch_bf16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]);
void sketch_f16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]);
}  // namespace avx512

}  // namespace graphprobe::simd
