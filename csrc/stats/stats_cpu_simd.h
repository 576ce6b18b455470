#pragma once
// AVX2 versions of the single-pass CPU statistics for float32, bfloat16 and
// float16, selected at run time. The portable loop (stats_cpu.cpp) is
// compute-bound in double at ~2.5 GB/s; these keep max/min/NaN-count in float
// lanes and widen to double only for the sums, which reads at memory speed.

#include <cstdint>

#include "stats/stats_cpu.h"

namespace graphprobe::simd {

// Whether this CPU runs the AVX2/FMA/F16C kernels (always false off x86-64,
// and when the environment variable GRAPHPROBE_NO_SIMD is set).
bool available();

// Each reduces data[0, n); NaNs are counted and left out of max/min.
Stats reduce_f32(const float* data, int64_t n);
Stats reduce_bf16(const uint16_t* bits, int64_t n);
Stats reduce_f16(const uint16_t* bits, int64_t n);

}  // namespace graphprobe::simd
