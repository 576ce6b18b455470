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
}  // namespace avx2

namespace avx512 {
Row reduce_f32(const float* data, int64_t n);
Row reduce_bf16(const uint16_t* bits, int64_t n);
Row reduce_f16(const uint16_t* bits, int64_t n);
}  // namespace avx512

}  // namespace graphprobe::simd
