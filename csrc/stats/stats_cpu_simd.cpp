#include "stats/stats_cpu_simd.h"

#include <cstdlib>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace graphprobe::simd {

#if defined(__x86_64__)

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Eight lanes of max/min (float), NaN count (int32: a lane sees at most
// 2^31 elements only beyond 64 GiB of input per call) and two times four
// lanes of sum and sum of squares (double).
struct Lanes {
  __m256 mx, mn;
  __m256i nan;
  __m256d s0, s1, q0, q1;
};

__attribute__((target("avx2,fma"))) inline Lanes start() {
  return Lanes{_mm256_set1_ps(-kInf), _mm256_set1_ps(kInf), _mm256_setzero_si256(), _mm256_setzero_pd(),
               _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
}

__attribute__((target("avx2,fma"))) inline void add(Lanes& l, __m256 v) {
  // max_ps/min_ps return their second operand when the first is NaN, so NaN
  // elements never enter max/min; they are counted instead.
  l.mx = _mm256_max_ps(v, l.mx);
  l.mn = _mm256_min_ps(v, l.mn);
  l.nan = _mm256_sub_epi32(l.nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
  const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
  l.s0 = _mm256_add_pd(l.s0, lo);
  l.s1 = _mm256_add_pd(l.s1, hi);
  l.q0 = _mm256_fmadd_pd(lo, lo, l.q0);
  l.q1 = _mm256_fmadd_pd(hi, hi, l.q1);
}

__attribute__((target("avx2,fma"))) Stats finish(const Lanes& l) {
  alignas(32) float mx[8], mn[8];
  alignas(32) int32_t nan[8];
  alignas(32) double s0[4], s1[4], q0[4], q1[4];
  _mm256_store_ps(mx, l.mx);
  _mm256_store_ps(mn, l.mn);
  _mm256_store_si256(reinterpret_cast<__m256i*>(nan), l.nan);
  _mm256_store_pd(s0, l.s0);
  _mm256_store_pd(s1, l.s1);
  _mm256_store_pd(q0, l.q0);
  _mm256_store_pd(q1, l.q1);
  Stats out{-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), 0.0, 0.0, 0};
  for (int i = 0; i < 8; ++i) {
    out.max = mx[i] > out.max ? mx[i] : out.max;
    out.min = mn[i] < out.min ? mn[i] : out.min;
    out.nan_count += nan[i];
  }
  for (int i = 0; i < 4; ++i) {
    out.sum += s0[i] + s1[i];
    out.sumsq += q0[i] + q1[i];
  }
  return out;
}

void add_scalar(Stats& out, float f) {
  const double v = f;
  out.max = v > out.max ? v : out.max;
  out.min = v < out.min ? v : out.min;
  out.nan_count += (v != v);
  out.sum += v;
  out.sumsq += v * v;
}

float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

bool available() {
  // GRAPHPROBE_NO_SIMD=1 forces the portable loop (tests compare both).
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c") && std::getenv("GRAPHPROBE_NO_SIMD") == nullptr;
  return ok;
}

__attribute__((target("avx2,fma"))) Stats reduce_f32(const float* data, int64_t n) {
  Lanes l = start();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) add(l, _mm256_loadu_ps(data + i));
  Stats out = finish(l);
  for (; i < n; ++i) add_scalar(out, data[i]);
  return out;
}

__attribute__((target("avx2,fma"))) Stats reduce_bf16(const uint16_t* bits, int64_t n) {
  Lanes l = start();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // bfloat16 is the upper half of a float32: widen and shift.
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i)));
    add(l, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  Stats out = finish(l);
  for (; i < n; ++i) add_scalar(out, bf16_to_float(bits[i]));
  return out;
}

__attribute__((target("avx2,fma,f16c"))) Stats reduce_f16(const uint16_t* bits, int64_t n) {
  Lanes l = start();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) add(l, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i))));
  Stats out = finish(l);
  for (; i < n; ++i) add_scalar(out, _cvtsh_ss(bits[i]));
  return out;
}

#else  // not x86-64: the portable loop serves every dtype

bool available() { return false; }
Stats reduce_f32(const float*, int64_t) { return Stats{}; }
Stats reduce_bf16(const uint16_t*, int64_t) { return Stats{}; }
Stats reduce_f16(const uint16_t*, int64_t) { return Stats{}; }

#endif

}  // namespace graphprobe::simd
