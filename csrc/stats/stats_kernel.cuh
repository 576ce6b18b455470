#pragma once
// The fused statistics kernels for CUDA. Torch-free, so that they compile
// (and can be checked with nvcc) without the ATen headers.
//
// begin_row (one thread) stamps the row with the current epoch and the next
// sequence number, counts repeated writes within an epoch, and resets the
// accumulators; accumulate_row then reads every element once and folds each
// block's partial max/min/sum/sum-of-squares/NaN-count into the row with one
// atomic per statistic per block. The epoch and sequence live in device
// memory, so a captured graph reads their current values on every replay; so
// does the live switch `enabled`: while it is 0 both kernels return at once.
//
// Memory speed: each thread keeps kUnroll 16-byte loads in flight (a grid-
// stride loop over 16-byte vectors from the first aligned address; the few
// elements before it and after the last whole vector are read one by one),
// and the grid is kBlocksPerSM resident blocks per multiprocessor. Floating
// types of at most 32 bits sum each 16-byte vector (4 to 16 elements) in
// float32 and add that into double: two conversions and two double additions
// per vector instead of per element. The error per vector is at most ~17 *
// 2^-24 of its sum of |x| (6e-7 of x^2 for the squares); a vector whose float
// sums are not finite (an inf or NaN element, squares beyond float's range)
// or whose sum of squares is below 2^-60 (squares of elements below 2^-63
// lose digits in float) while holding a non-zero element is recomputed
// exactly in double from the registers. Integers and doubles accumulate in
// double per element, as they must. Cross-block: one atomic per statistic per
// block (at most multiprocessors * kBlocksPerSM per launch): a deterministic
// second level would need scratch memory per launch, i.e. an allocation
// inside graph capture; the atomics only make the sum's last bits depend on
// the order in which blocks finish.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "record/row.h"
#include "stats/sketch.h"

namespace graphprobe::kernels {

constexpr int kThreads = 256;
// 16-byte loads each thread keeps in flight.
constexpr int kUnroll = 4;
// Resident blocks per multiprocessor the grid is sized for (and the register
// budget __launch_bounds__ gives each thread: 64).
constexpr int kBlocksPerSM = 4;

// Integers (bool included) convert to double directly: through float, 32-
// and 64-bit values would lose digits. Floating types of at most 32 bits
// (half, bfloat16, float8) convert through float, exactly: without
// --use_fast_math (setup.py) the conversions keep subnormals.
template <typename T>
__device__ inline double to_double(T v) {
  if constexpr (std::is_integral_v<T> || std::is_same_v<T, double>) {
    return static_cast<double>(v);
  } else {
    return static_cast<double>(static_cast<float>(v));
  }
}

__device__ inline void atomic_max(double* addr, double v) {
  auto* p = reinterpret_cast<unsigned long long*>(addr);
  unsigned long long old = *p;
  while (__longlong_as_double(static_cast<long long>(old)) < v) {
    const unsigned long long assumed = old;
    old = atomicCAS(p, assumed, static_cast<unsigned long long>(__double_as_longlong(v)));
    if (old == assumed) break;
  }
}

__device__ inline void atomic_min(double* addr, double v) {
  auto* p = reinterpret_cast<unsigned long long*>(addr);
  unsigned long long old = *p;
  while (__longlong_as_double(static_cast<long long>(old)) > v) {
    const unsigned long long assumed = old;
    old = atomicCAS(p, assumed, static_cast<unsigned long long>(__double_as_longlong(v)));
    if (old == assumed) break;
  }
}

// `hashed`: checksum_row (checksum_kernel.cuh) follows and fills the checksum.
__global__ void begin_row(double* row, const int64_t* epoch, unsigned long long* seq, const int64_t* enabled,
                          int hashed) {
  if (*enabled == 0) return;
  const double e = static_cast<double>(*epoch);
  row[column::kWrites] = row[column::kStamp] == e ? row[column::kWrites] + 1.0 : 1.0;
  row[column::kStamp] = e;
  row[column::kSeq] = static_cast<double>(atomicAdd(seq, 1ULL) + 1ULL);
  row[column::kMax] = -__longlong_as_double(0x7ff0000000000000LL);
  row[column::kMin] = __longlong_as_double(0x7ff0000000000000LL);
  row[column::kSum] = 0.0;
  row[column::kSumSq] = 0.0;
  row[column::kNanCount] = 0.0;
  row[column::kChecksum] = 0.0;  // all bits 0: the sum of no contributions
  row[column::kHashed] = hashed != 0 ? 1.0 : 0.0;
  for (int k = 0; k < sketch::kProjections; ++k) row[column::kSketch0 + k] = 0.0;
}

// max/min in float for floating types of at most 32 bits (exact: they are
// floats), in double for integers and doubles.
template <typename T>
constexpr bool kFloatPath = !std::is_integral_v<T> && !std::is_same_v<T, double>;

template <typename T>
using Extreme = std::conditional_t<kFloatPath<T>, float, double>;

template <typename M>
struct Partial {
  M mx, mn;
  double s, sq;
  unsigned long long nan;
  double sk[sketch::kProjections];  // the Sketch's signed sums (stats/sketch.h)
};

template <typename M>
__device__ inline Partial<M> start_partial() {
  const double inf = __longlong_as_double(0x7ff0000000000000LL);
  return Partial<M>{static_cast<M>(-inf), static_cast<M>(inf), 0.0, 0.0, 0ULL, {0.0, 0.0, 0.0, 0.0}};
}

// The four sign bits of element i (bit k set: projection k takes -x).
__device__ inline unsigned sketch_signs(int64_t i) {
  const uint64_t bits = sketch::group_bits(static_cast<uint64_t>(i) / sketch::kGroup);
  return sketch::lane_bits(bits, static_cast<int>(static_cast<uint64_t>(i) % sketch::kGroup));
}

template <typename A>
__device__ inline void add_signed(A* sk, unsigned signs, A v) {
#pragma unroll
  for (int k = 0; k < sketch::kProjections; ++k) sk[k] += ((signs >> k) & 1u) ? -v : v;
}

// One element, exactly: the head and tail, integers, doubles, and float
// vectors whose float sums cannot be trusted. A NaN compares false: it is
// counted, not folded into max/min. `index`: its row-major position, for the
// Sketch's signs.
template <typename M>
__device__ inline void add_exact(Partial<M>& p, double v, int64_t index) {
  const M m = static_cast<M>(v);
  p.mx = m > p.mx ? m : p.mx;
  p.mn = m < p.mn ? m : p.mn;
  p.nan += (v != v) ? 1ULL : 0ULL;
  p.s += v;
  p.sq += v * v;
  add_signed(p.sk, sketch_signs(index), v);
}

// The exact statistics without the Sketch (a vector whose float sums are
// recomputed: its sketch sums were taken already).
template <typename M>
__device__ inline void add_exact_moments(Partial<M>& p, double v) {
  p.s += v;
  p.sq += v * v;
}

// The elements of one 16-byte vector.
template <typename T>
struct Vec {
  static constexpr int kLanes = 16 / static_cast<int>(sizeof(T));
  T v[kLanes];
};

template <typename T>
__device__ inline Vec<T> unpack(const uint4& raw) {
  Vec<T> out;
  memcpy(&out, &raw, sizeof(raw));
  return out;
}

// `first`: the row-major index of x.v[0]. A vector of at most 16 elements
// spans at most two groups of the Sketch's signs.
template <typename T>
__device__ inline void add_vector(Partial<Extreme<T>>& p, const Vec<T>& x, int64_t first) {
  const uint64_t g0 = static_cast<uint64_t>(first) / sketch::kGroup;
  const uint64_t bits0 = sketch::group_bits(g0);
  const uint64_t last_group = static_cast<uint64_t>(first + Vec<T>::kLanes - 1) / sketch::kGroup;
  const uint64_t bits1 = last_group == g0 ? bits0 : sketch::group_bits(last_group);
  auto signs = [&](int j) {
    const uint64_t i = static_cast<uint64_t>(first + j);
    return sketch::lane_bits(i / sketch::kGroup == g0 ? bits0 : bits1, static_cast<int>(i % sketch::kGroup));
  };
  if constexpr (kFloatPath<T>) {
    // fmaxf/fminf return the other operand for a NaN: NaNs stay out of
    // max/min without a branch.
    float s = 0.0f, sq = 0.0f, mx = p.mx, mn = p.mn, lmx = 0.0f, lmn = 0.0f;
    float sk[sketch::kProjections] = {0.0f, 0.0f, 0.0f, 0.0f};
    unsigned int nan = 0;
#pragma unroll
    for (int j = 0; j < Vec<T>::kLanes; ++j) {
      const float f = static_cast<float>(x.v[j]);
      mx = fmaxf(f, mx);
      mn = fminf(f, mn);
      lmx = fmaxf(f, lmx);
      lmn = fminf(f, lmn);
      nan += (f != f) ? 1u : 0u;
      s += f;
      sq = fmaf(f, f, sq);
      add_signed(sk, signs(j), f);
    }
    p.mx = mx;
    p.mn = mn;
    p.nan += nan;
#pragma unroll
    for (int k = 0; k < sketch::kProjections; ++k) p.sk[k] += static_cast<double>(sk[k]);
    const bool zeros = lmx == 0.0f && lmn == 0.0f;  // every element +-0 (or NaN, caught by isfinite)
    if (isfinite(s) && isfinite(sq) && (sq >= 0x1p-60f || zeros)) {
      p.s += static_cast<double>(s);
      p.sq += static_cast<double>(sq);
    } else {
#pragma unroll
      for (int j = 0; j < Vec<T>::kLanes; ++j) add_exact_moments(p, to_double(x.v[j]));
    }
  } else {
#pragma unroll
    for (int j = 0; j < Vec<T>::kLanes; ++j) {
      const double v = to_double(x.v[j]);
      const Extreme<T> m = static_cast<Extreme<T>>(v);
      p.mx = m > p.mx ? m : p.mx;
      p.mn = m < p.mn ? m : p.mn;
      p.nan += (v != v) ? 1ULL : 0ULL;
      add_exact_moments(p, v);
      add_signed(p.sk, signs(j), v);
    }
  }
}

template <typename M>
__device__ inline Partial<M> merge(Partial<M> a, const Partial<M>& b) {
  a.mx = b.mx > a.mx ? b.mx : a.mx;
  a.mn = b.mn < a.mn ? b.mn : a.mn;
  a.s += b.s;
  a.sq += b.sq;
  a.nan += b.nan;
#pragma unroll
  for (int k = 0; k < sketch::kProjections; ++k) a.sk[k] += b.sk[k];
  return a;
}

template <typename M>
__device__ inline Partial<M> shuffle_down(const Partial<M>& p, int offset) {
  return Partial<M>{__shfl_down_sync(0xffffffffu, p.mx, offset), __shfl_down_sync(0xffffffffu, p.mn, offset),
                    __shfl_down_sync(0xffffffffu, p.s, offset), __shfl_down_sync(0xffffffffu, p.sq, offset),
                    __shfl_down_sync(0xffffffffu, p.nan, offset),
                    {__shfl_down_sync(0xffffffffu, p.sk[0], offset), __shfl_down_sync(0xffffffffu, p.sk[1], offset),
                     __shfl_down_sync(0xffffffffu, p.sk[2], offset), __shfl_down_sync(0xffffffffu, p.sk[3], offset)}};
}

template <typename T>
__global__ void __launch_bounds__(kThreads, kBlocksPerSM)
    accumulate_row(const T* __restrict__ x, int64_t n, double* row, const int64_t* enabled) {
  if (*enabled == 0) return;
  using M = Extreme<T>;
  constexpr int kLanes = Vec<T>::kLanes;
  Partial<M> p = start_partial<M>();
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // Elements before the first 16-byte aligned address (the address of an
  // element is a multiple of its size, which divides 16).
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(x) & 15u);
  int64_t head = misalign == 0 ? 0 : (16 - misalign) / static_cast<int64_t>(sizeof(T));
  head = head < n ? head : n;
  const int64_t vectors = (n - head) / kLanes;
  const uint4* __restrict__ vx = reinterpret_cast<const uint4*>(x + head);
  for (int64_t base = tid; base < vectors; base += threads * kUnroll) {
    // All loads first, so that kUnroll of them are in flight at once.
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * threads;
      if (i < vectors) raw[u] = __ldg(vx + i);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * threads < vectors) add_vector<T>(p, unpack<T>(raw[u]), head + (base + u * threads) * kLanes);
    }
  }
  const int64_t tail = head + vectors * kLanes;
  if (tid < head) add_exact(p, to_double(x[tid]), tid);
  if (tid < n - tail) add_exact(p, to_double(x[tail + tid]), tail + tid);

  for (int offset = 16; offset > 0; offset >>= 1) p = merge(p, shuffle_down(p, offset));
  __shared__ Partial<M> warps[kThreads / 32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = p;
  __syncthreads();
  if (warp == 0) {
    p = lane < static_cast<int>(blockDim.x >> 5) ? warps[lane] : start_partial<M>();
    for (int offset = 16; offset > 0; offset >>= 1) p = merge(p, shuffle_down(p, offset));
    if (lane == 0) {
      atomic_max(row + column::kMax, static_cast<double>(p.mx));
      atomic_min(row + column::kMin, static_cast<double>(p.mn));
      atomicAdd(row + column::kSum, p.s);
      atomicAdd(row + column::kSumSq, p.sq);
      if (p.nan > 0) atomicAdd(row + column::kNanCount, static_cast<double>(p.nan));
#pragma unroll
      for (int k = 0; k < sketch::kProjections; ++k) atomicAdd(row + column::kSketch0 + k, p.sk[k]);
    }
  }
}

// Blocks for n elements of `element_size` bytes: enough to keep every
// multiprocessor full (kBlocksPerSM resident blocks each), never more than
// the work needs (one block covers kThreads * kUnroll vectors per pass).
inline unsigned int blocks_for(int64_t n, int64_t element_size, int multiprocessors) {
  const int64_t per_block = static_cast<int64_t>(kThreads) * kUnroll * (16 / element_size);
  const int64_t needed = (n + per_block - 1) / per_block;
  const int64_t cap = static_cast<int64_t>(multiprocessors) * kBlocksPerSM;
  const int64_t b = needed < cap ? needed : cap;
  return static_cast<unsigned int>(b < 1 ? 1 : b);
}

}  // namespace graphprobe::kernels
