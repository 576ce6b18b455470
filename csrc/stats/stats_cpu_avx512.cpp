// The block statistics (simd_block_reduce.h) for AVX-512 (F, DQ; BMI2 for the
// Sketch): sixteen
// float lanes. Only this file's own code is compiled for AVX-512 (the target
// switch comes after every header shared with other files), and
// stats_cpu_simd.cpp calls it only on CPUs (and kernels) that run it.

#include "stats/simd_isa.h"

#include <cstdint>
#include <limits>

#include "stats/sketch.h"
#include "stats/stats_cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx2,fma,f16c,bmi2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx2,fma,f16c,bmi2")
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about
// it (GCC bug 105593), once per use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "stats/simd_block_reduce.h"

namespace graphprobe::simd::avx512 {
namespace {

struct Isa {
  using F = __m512;
  using D = __m512d;
  static constexpr int kLanes = 16;
  // Thirty-two registers: room for the constant 1 of the FMA-form sum.
  // Vectors each accumulator adds per block (simd_block_reduce.h).
  static constexpr int kSteps = 16;
  // Independent max/min accumulators (simd_block_reduce.h).
  static constexpr int kMinMaxChains = 4;
  static constexpr bool kSumOnFma = true;
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  // max_ps/min_ps return their second operand when the first is NaN: a NaN
  // element never enters the running max/min.
  static F max(F v, F acc) { return _mm512_max_ps(v, acc); }
  static F min(F v, F acc) { return _mm512_min_ps(v, acc); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static D dzero() { return _mm512_setzero_pd(); }
  static D dadd(D a, D b) { return _mm512_add_pd(a, b); }
  static D dfma(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  static void widen(F v, D& lo, D& hi) {
    lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
  // v - v is 0 for a finite lane and NaN for an inf or NaN one.
  static bool all_finite(F v) {
    return _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), _mm512_setzero_ps(), _CMP_EQ_OQ) == 0xffff;
  }
  static bool all_at_least(F v, float t) { return _mm512_cmp_ps_mask(v, _mm512_set1_ps(t), _CMP_GE_OQ) == 0xffff; }
  // No lane is NaN here (see max/min), so the reductions' order is immaterial.
  static float hmax(F v) { return _mm512_reduce_max_ps(v); }
  static float hmin(F v) { return _mm512_reduce_min_ps(v); }
  // A fixed tree of additions: the same result on every call.
  static double hsum(D v) { return _mm512_reduce_add_pd(v); }
};

struct LoadF32 {
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static void pair(const float* p, __m512& a, __m512& b) {
    a = _mm512_loadu_ps(p);
    b = _mm512_loadu_ps(p + 16);
  }
  static float scalar(float v) { return v; }
};

// bfloat16 is the upper half of a float32: widen and shift; for a pair,
// shift the even elements of one 64-byte load up and mask the odd ones.
struct LoadBF16 {
  static void pair(const uint16_t* p, __m512& a, __m512& b) {
    const __m512i w = _mm512_loadu_si512(p);
    a = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    b = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  static __m512 load(const uint16_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static float scalar(uint16_t b) { return detail::bf16_to_float(b); }
};

struct LoadF16 {
  static __m512 load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void pair(const uint16_t* p, __m512& a, __m512& b) {
    a = load(p);
    b = load(p + 16);
  }
  static float scalar(uint16_t h) { return _cvtsh_ss(h); }
};

// The Sketch's signed sums over whole groups of 16 elements (stats/sketch.h):
// one group is one vector. sum_k = sum(x) - 2 * (the sum of the lanes whose
// sign bit k is set): per group one add into the plain sum and, per
// projection, one masked add, its mask lane l = bit 4l + k of the group's
// hash (pext gathers every fourth bit). Float32 accumulators per block of
// kSketchBlock groups, flushed into double (as the statistics' sums).
constexpr int64_t kSketchBlock = 16;

template <class Load, class Src>
void sketch_groups(const Src* p, uint64_t first_group, int64_t groups, double out[4]) {
  constexpr uint64_t kLaneBit0 = 0x1111111111111111ULL;
  __m512d total_plain = _mm512_setzero_pd();
  __m512d total_neg[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
  auto flush = [](__m512 acc, __m512d& total) {
    __m512d lo, hi;
    Isa::widen(acc, lo, hi);
    total = _mm512_add_pd(total, _mm512_add_pd(lo, hi));
  };
  for (int64_t g = 0; g < groups;) {
    const int64_t stop = groups - g < kSketchBlock ? groups : g + kSketchBlock;
    __m512 plain = _mm512_setzero_ps();
    __m512 neg[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (; g < stop; ++g) {
      const __m512 x = Load::load(p + g * 16);
      const uint64_t h = sketch::group_bits(first_group + static_cast<uint64_t>(g));
      plain = _mm512_add_ps(plain, x);
      for (int k = 0; k < 4; ++k) {
        const auto m = static_cast<__mmask16>(_pext_u64(h, kLaneBit0 << k));
        neg[k] = _mm512_mask_add_ps(neg[k], m, neg[k], x);
      }
    }
    flush(plain, total_plain);
    for (int k = 0; k < 4; ++k) flush(neg[k], total_neg[k]);
  }
  const double sum = _mm512_reduce_add_pd(total_plain);
  for (int k = 0; k < 4; ++k) out[k] += sum - 2.0 * _mm512_reduce_add_pd(total_neg[k]);
}

}  // namespace

Row reduce_f32(const float* data, int64_t n) { return detail::reduce<Isa, LoadF32>(data, n); }
Row reduce_bf16(const uint16_t* bits, int64_t n) { return detail::reduce<Isa, LoadBF16>(bits, n); }
Row reduce_f16(const uint16_t* bits, int64_t n) { return detail::reduce<Isa, LoadF16>(bits, n); }

void sketch_f32(const float* data, uint64_t first_group, int64_t groups, double out[4]) {
  sketch_groups<LoadF32>(data, first_group, groups, out);
}
void sketch_bf16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]) {
  sketch_groups<LoadBF16>(bits, first_group, groups, out);
}
void sketch_f16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]) {
  sketch_groups<LoadF16>(bits, first_group, groups, out);
}

}  // namespace graphprobe::simd::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

#else  // not x86-64: never called (stats_cpu_simd.cpp reports no SIMD)

namespace graphprobe::simd::avx512 {
Row reduce_f32(const float*, int64_t) { return Row{}; }
Row reduce_bf16(const uint16_t*, int64_t) { return Row{}; }
Row reduce_f16(const uint16_t*, int64_t) { return Row{}; }
void sketch_f32(const float*, uint64_t, int64_t, double*) {}
void sketch_bf16(const uint16_t*, uint64_t, int64_t, double*) {}
void sketch_f16(const uint16_t*, uint64_t, int64_t, double*) {}
}  // namespace graphprobe::simd::avx512

#endif
