#pragma once
// The single-pass statistics over a contiguous run of float32, bfloat16 or
// float16, written once for any vector width: `Isa` supplies the vector types
// and operations (stats_cpu_avx2.cpp, stats_cpu_avx512.cpp include this file
// after switching the target ISA on, so everything here is compiled for it).
//
// Why float32 blocks: converting every element to double (the exact way)
// costs two conversions, two double additions and two double FMAs per eight
// elements, which caps a core at ~30 GB/s, a third of what torch.sum reads
// from cache. So each block of kBlock elements accumulates sum and sum of
// squares in float32 (kChains independent accumulators per statistic, kSteps
// elements per lane), and the block's float totals are added into double.
// Per block the relative error is at most ~(kSteps + 3) * 2^-24 of the block's
// sum of |x| (of x^2 for the squares): ~1.2e-6 for 16 steps, inside the 1e-5
// asked of every statistic (typical errors, which do not all point one way,
// are ~sqrt(kSteps) * 2^-24). Each Isa picks its kSteps (at most 16): longer
// blocks spread the per-block test and flush (~7 % of a 16-step block), as
// far as its registers allow. max/min are
// exact in float; NaN elements are not counted
// here (the caller counts them only when the sum comes out NaN). The order
// in which elements reach the lanes is immaterial to the statistics, which
// lets a loader split 2 * kLanes elements into two vectors however is
// cheapest (bfloat16: even and odd halves of one load, no shuffle).
//
// A block whose float totals could differ from double by more than rounding
// is recomputed exactly in double: a non-finite total (an inf or NaN element,
// or squares beyond float's range) or a sum of squares below 2^-60 (squares of
// elements below 2^-63 lose digits or vanish in float). So inf, NaN, huge and
// subnormal values give what the exact double loop gives. A block of zeros
// (a sum of squares of 0 while every element so far is 0) stays on the fast
// path: its float totals are exact.

#include <cstdint>
#include <limits>

#include "stats/stats_cpu.h"

namespace graphprobe::simd::detail {

// Elements per block; each of kChains chains adds kSteps vectors per block.
template <class Isa>
struct Shape {
  static constexpr int kChains = 4;
  static constexpr int kSteps = Isa::kSteps;
  static constexpr int64_t kBlock = int64_t{kChains} * kSteps * Isa::kLanes;
};

// Double accumulation of n elements (the exact fallback and the tail).
template <class Isa, class Load, class Src>
inline void exact_run(const Src* p, int64_t n, typename Isa::F& mx, typename Isa::F& mn, typename Isa::D& s,
                      typename Isa::D& q, double& ss, double& sq, float& smx, float& smn) {
  int64_t i = 0;
  for (; i + Isa::kLanes <= n; i += Isa::kLanes) {
    const typename Isa::F v = Load::load(p + i);
    mx = Isa::max(v, mx);
    mn = Isa::min(v, mn);
    typename Isa::D lo, hi;
    Isa::widen(v, lo, hi);
    s = Isa::dadd(s, Isa::dadd(lo, hi));
    q = Isa::dfma(lo, lo, Isa::dfma(hi, hi, q));
  }
  for (; i < n; ++i) {
    const float f = Load::scalar(p[i]);
    // A NaN compares false: it stays out of max/min (as max_ps/min_ps do).
    smx = f > smx ? f : smx;
    smn = f < smn ? f : smn;
    const double v = f;
    ss += v;
    sq += v * v;
  }
}

// bfloat16 is the upper half of a float32. Internal linkage (static), as
// everything else here is a template on a file-local Isa: each including
// file compiles it for its own target, and a shared inline definition would
// let the linker hand one file's AVX-512 copy to the other's AVX2 callers.
static inline float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, sizeof(f));
  return f;
}

// Whether every element read so far is +-0 (the running max and min are 0):
// a block of zeros sums exactly in float and needs no exact pass.
template <class Isa>
inline bool only_zeros(typename Isa::F mx0, typename Isa::F mx1, typename Isa::F mx2, typename Isa::F mx3,
                       typename Isa::F mn0, typename Isa::F mn1, typename Isa::F mn2, typename Isa::F mn3) {
  const typename Isa::F hi = Isa::max(Isa::max(mx0, mx1), Isa::max(mx2, mx3));
  const typename Isa::F lo = Isa::min(Isa::min(mn0, mn1), Isa::min(mn2, mn3));
  return Isa::hmax(hi) == 0.0f && Isa::hmin(lo) == 0.0f;
}

template <class Isa, class Load, class Src>
Row reduce(const Src* p, int64_t n) {
  using F = typename Isa::F;
  using D = typename Isa::D;
  using S = Shape<Isa>;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kTiny = 0x1p-60f;
  const F one = Isa::set1(1.0f);
  F mx0 = Isa::set1(-kInf), mx1 = mx0, mx2 = mx0, mx3 = mx0;
  F mn0 = Isa::set1(kInf), mn1 = mn0, mn2 = mn0, mn3 = mn0;
  D s = Isa::dzero(), q = Isa::dzero();
  double ss = 0.0, sq = 0.0;
  float smx = -kInf, smn = kInf;
  int64_t i = 0;
  for (; i + S::kBlock <= n; i += S::kBlock) {
    F s0 = Isa::zero(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    const Src* b = p + i;
    // Not unrolled: unrolled, GCC groups all steps' maxima, then their
    // minima, ..., and keeps the loaded vectors on the stack meanwhile.
#pragma GCC unroll 1
    for (int k = 0; k < S::kSteps; ++k, b += S::kChains * Isa::kLanes) {
      F v0, v1, v2, v3;
      Load::pair(b, v0, v1);
      Load::pair(b + 2 * Isa::kLanes, v2, v3);
      mx0 = Isa::max(v0, mx0), mx1 = Isa::max(v1, mx1), mn0 = Isa::min(v0, mn0), mn1 = Isa::min(v1, mn1);
      if constexpr (Isa::kMinMaxChains == 4) {
        mx2 = Isa::max(v2, mx2), mx3 = Isa::max(v3, mx3), mn2 = Isa::min(v2, mn2), mn3 = Isa::min(v3, mn3);
      } else {
        // Two chains (max/min have a short latency) leave registers for the sums.
        mx0 = Isa::max(v2, mx0), mx1 = Isa::max(v3, mx1), mn0 = Isa::min(v2, mn0), mn1 = Isa::min(v3, mn1);
      }
      if constexpr (Isa::kSumOnFma) {
        // v * 1 + s rounds exactly as v + s, but runs on the FMA units: max
        // and min take the adder units (AMD Zen 4), and adds there too would
        // make three operations queue on two units while the FMA units idle
        // (+20-35 % measured in cache).
        s0 = Isa::fma(v0, one, s0), s1 = Isa::fma(v1, one, s1), s2 = Isa::fma(v2, one, s2), s3 = Isa::fma(v3, one, s3);
      } else {
        s0 = Isa::add(s0, v0), s1 = Isa::add(s1, v1), s2 = Isa::add(s2, v2), s3 = Isa::add(s3, v3);
      }
      q0 = Isa::fma(v0, v0, q0), q1 = Isa::fma(v1, v1, q1), q2 = Isa::fma(v2, v2, q2), q3 = Isa::fma(v3, v3, q3);
    }
    const F bs = Isa::add(Isa::add(s0, s1), Isa::add(s2, s3));
    const F bq = Isa::add(Isa::add(q0, q1), Isa::add(q2, q3));
    // One test per block: bq is finite and not tiny in every lane, bs finite.
    const bool exact_in_float = Isa::all_finite(bs) && Isa::all_finite(bq) &&
                                (Isa::all_at_least(bq, kTiny) || only_zeros<Isa>(mx0, mx1, mx2, mx3, mn0, mn1, mn2, mn3));
    if (exact_in_float) {
      D lo, hi;
      Isa::widen(bs, lo, hi);
      s = Isa::dadd(s, Isa::dadd(lo, hi));
      Isa::widen(bq, lo, hi);
      q = Isa::dadd(q, Isa::dadd(lo, hi));
    } else {
      exact_run<Isa, Load>(p + i, S::kBlock, mx0, mn0, s, q, ss, sq, smx, smn);
    }
  }
  exact_run<Isa, Load>(p + i, n - i, mx0, mn0, s, q, ss, sq, smx, smn);
  const float vmx = Isa::hmax(Isa::max(Isa::max(mx0, mx1), Isa::max(mx2, mx3)));
  const float vmn = Isa::hmin(Isa::min(Isa::min(mn0, mn1), Isa::min(mn2, mn3)));
  return stats_row(vmx > smx ? vmx : smx, vmn < smn ? vmn : smn, Isa::hsum(s) + ss, Isa::hsum(q) + sq, 0.0);
}

}  // namespace graphprobe::simd::detail
