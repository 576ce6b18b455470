// The block statistics (simd_block_reduce.h) for AVX-512 (F, DQ): sixteen
// float lanes. Only this file's own code is compiled for AVX-512 (the target
// switch comes after every header shared with other files), and
// stats_cpu_simd.cpp calls it only on CPUs (and kernels) that run it.

#include "stats/simd_isa.h"

#include <cstdint>
#include <limits>

#include "stats/stats_cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx2,fma,f16c")
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

}  // namespace

Row reduce_f32(const float* data, int64_t n) { return detail::reduce<Isa, LoadF32>(data, n); }
Row reduce_bf16(const uint16_t* bits, int64_t n) { return detail::reduce<Isa, LoadBF16>(bits, n); }
Row reduce_f16(const uint16_t* bits, int64_t n) { return detail::reduce<Isa, LoadF16>(bits, n); }

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
}  // namespace graphprobe::simd::avx512

#endif
