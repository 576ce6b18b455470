#include "stats/stats_aten.h"

// The operators used, one header each: with <ATen/ATen.h> (every operator)
// this file took 12.7 s of CPU to compile, with these 6.6 s (2026-12-02).
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <limits>

#include "record/row.h"
#include "stats/reducible_types.h"
#include "stats/sketch.h"

namespace graphprobe::stats {

namespace {

// The Sketch (stats/sketch.h) in aten ops.
//
// The 64-bit hash is carried as two 32-bit limbs in int64 tensors, and every
// step stays within [0, 2^63): a product of a limb and a 16-bit piece of a
// constant is below 2^48. Wrapping int64 products would take fewer ops, but
// a device is free to compute an overflowing int64 product otherwise (the
// NPU's integer units are unverified, and gcc folded such a product to
// INT64_MAX in inductor's generated code), while these ops have one result
// everywhere. Right shifts of non-negative values need no masking either.
// graphprobe/wiring/fused_stats.py computes the same limbs in inductor.
struct Limbs {
  at::Tensor hi;  // bits 32..63
  at::Tensor lo;  // bits 0..31
};

constexpr int64_t kLow32 = 0xFFFFFFFF;
constexpr int64_t kLow16 = 0xFFFF;

// (v * c) mod 2^64.
Limbs mul_limbs(const Limbs& v, uint64_t c) {
  const auto piece = [c](int j) { return static_cast<int64_t>((c >> (16 * j)) & kLow16); };
  const at::Tensor p1 = v.lo.mul(piece(1));
  const at::Tensor t = v.lo.mul(piece(0)).add_(p1.bitwise_and(kLow16).mul_(int64_t{1} << 16));
  const at::Tensor carry = t.bitwise_right_shift(32).add_(p1.bitwise_right_shift(16));
  // The high limb: lo times c's high half and hi times c's low half, each
  // modulo 2^32, plus the carry out of the low limb.
  at::Tensor hi = v.lo.mul(piece(2)).add_(v.lo.mul(piece(3)).bitwise_and_(kLow16).mul_(int64_t{1} << 16));
  hi.add_(v.hi.mul(piece(0))).add_(v.hi.mul(piece(1)).bitwise_and_(kLow16).mul_(int64_t{1} << 16));
  hi.add_(carry).bitwise_and_(kLow32);
  return {hi, t.bitwise_and(kLow32)};
}

// x ^= x >> 33: bits 33..63 (the high limb's bits 1..31) into the low limb.
void xor_shift33(Limbs& v) { v.lo = v.lo.bitwise_xor(v.hi.bitwise_right_shift(1)); }

// sketch::group_bits of the groups whose g + 1 `g1` holds (int64, < 2^63).
Limbs group_bits(const at::Tensor& g1) {
  Limbs v{g1.bitwise_right_shift(32), g1.bitwise_and(kLow32)};
  v = mul_limbs(v, sketch::kSketchKey);
  xor_shift33(v);
  v = mul_limbs(v, 0xFF51AFD7ED558CCDULL);  // fmix64's multipliers (stats/checksum.h)
  xor_shift33(v);
  v = mul_limbs(v, 0xC4CEB9FE1A85EC53ULL);
  xor_shift33(v);
  return v;
}

// Elements per pass: bounds the temporaries (about 64 bytes an element: the
// sign bits as int64, the signs and the signed elements as float32, four of
// each) to 64 MiB whatever the tensor's size.
constexpr int64_t kSketchChunk = int64_t{1} << 20;

// [start, end) as int64 on `options`' device. Through arange's out= form:
// the factory form reaches a PrivateUse1 device through accelerator hooks
// that the tests' fake NPU (tests/fake_npu) does not register.
at::Tensor int64_range(int64_t start, int64_t end, const at::TensorOptions& options) {
  at::Tensor out = at::empty({end - start}, options);
  return at::arange_out(out, start, end, 1);
}

// Float32 [4]: the Sketch of x (float32, non-empty), summed in float32 (the
// NPU has no float64; float64 tensors elsewhere are rounded to float32 as
// for the other statistics of this path).
at::Tensor sketch_aten(const at::Tensor& x) {
  const auto i64 = x.options().dtype(at::kLong);
  // Row-major order is what the signs are defined on: a strided x is read
  // as its contiguous copy.
  const at::Tensor flat = x.contiguous().view(-1);
  const int64_t n = flat.numel();
  // Bit 4 * l + k of the hash signs lane l in projection k; lanes 0..7 take
  // it from the low limb, 8..15 from the high one: [limb, lane % 8, k].
  const at::Tensor shifts = int64_range(0, 32, i64).view({1, 1, 8, sketch::kProjections});
  at::Tensor sums = at::zeros({sketch::kProjections}, x.options());
  for (int64_t begin = 0; begin < n; begin += kSketchChunk) {
    const int64_t m = std::min(kSketchChunk, n - begin);
    const int64_t groups = (m + sketch::kGroup - 1) / sketch::kGroup;
    const int64_t first = begin / sketch::kGroup;  // chunks start at group boundaries
    const Limbs h = group_bits(int64_range(first + 1, first + groups + 1, i64));
    const at::Tensor bits = at::stack({h.lo, h.hi}, 1).view({groups, 2, 1, 1}).bitwise_right_shift(shifts).bitwise_and_(1);
    // 1 - 2 * bit, per element and projection: [m, 4].
    const at::Tensor signs =
        bits.to(at::kFloat).mul_(-2).add_(1).view({groups * sketch::kGroup, sketch::kProjections}).narrow(0, 0, m);
    sums.add_(flat.narrow(0, begin, m).unsqueeze(1).mul(signs).sum(0));
  }
  return sums;
}

// Stamps `row` and writes `values` (float32 [4]), `nans` (int32 [1]) and
// `sketch_sums` (float32 [4]) into it, all on the device, unless the live switch
// reads 0.
void write_row(const at::Tensor& values, const at::Tensor& nans, const at::Tensor& sketch_sums, const at::Tensor& row,
               const at::Tensor& counters) {
  const at::Tensor epoch = counters.narrow(0, 0, 1);
  const at::Tensor seq = counters.narrow(0, 1, 1);
  const at::Tensor enabled = counters.narrow(0, 2, 1);
  // The sequence advances by the switch (1 or 0), on the device.
  seq.add_(enabled);
  const at::Tensor stamp_old = row.narrow(0, column::kStamp, 1);
  const at::Tensor writes =
      at::where(stamp_old.eq(epoch), row.narrow(0, column::kWrites, 1).add(1), at::ones({1}, row.options()));
  const at::Tensor next =
      at::cat({values.contiguous().view(at::kInt), nans, epoch, seq, writes, sketch_sums.contiguous().view(at::kInt)});
  row.copy_(at::where(enabled.ne(0), next, row));
}

// Float32 [4] NaNs on x's device: a row without a Sketch.
at::Tensor no_sketch(const at::Tensor& like) {
  return at::full({sketch::kProjections}, std::numeric_limits<float>::quiet_NaN(), like.options().dtype(at::kFloat));
}

}  // namespace

void write_values_aten(const at::Tensor& values, const at::Tensor& row, const at::Tensor& counters) {
  const at::Tensor v = values.to(at::kFloat);
  constexpr int64_t kStats = column::kNanCount + 1;
  const at::Tensor sums =
      v.numel() >= kStats + sketch::kProjections ? v.narrow(0, kStats, sketch::kProjections) : no_sketch(v);
  write_row(v.narrow(0, column::kMax, 4), v.narrow(0, column::kNanCount, 1).to(at::kInt), sums, row, counters);
}

void record_row_aten(const at::Tensor& x, const at::Tensor& row, const at::Tensor& counters, bool with_sketch) {
  const auto f32 = x.options().dtype(at::kFloat);
  const auto i32 = x.options().dtype(at::kInt);
  at::Tensor values;  // float32 [4]: max, min, sum, sum of squares
  at::Tensor nans;    // int32 [1]
  at::Tensor sums;    // float32 [4]: the Sketch, or NaN
  if (value_kind(x.scalar_type()) != ValueKind::kNoStats && x.numel() > 0) {
    const at::Tensor v = x.detach().to(at::kFloat);
    const at::Tensor nan = v.isnan();
    // NaN elements stay out of max/min/sums (the count turns them into NaN
    // at step(), as on CPU and CUDA).
    const at::Tensor clean = v.masked_fill(nan, 0.0);
    values = at::stack({v.masked_fill(nan, -std::numeric_limits<float>::infinity()).amax(),
                        v.masked_fill(nan, std::numeric_limits<float>::infinity()).amin(), clean.sum(),
                        clean.mul(clean).sum()});
    nans = nan.sum(at::kInt).reshape({1});
    // A NaN or an infinity makes the Sketch non-finite, and dump.json then
    // leaves it out, as for the CPU and CUDA kernels' sums.
    const bool floating = value_kind(x.scalar_type()) == ValueKind::kFloating;
    sums = with_sketch && floating ? sketch_aten(v) : no_sketch(row);
  } else {
    // Only the row's stamp matters: its record carries no statistics.
    values = at::zeros({4}, f32);
    nans = at::zeros({1}, i32);
    sums = no_sketch(row);
  }
  write_row(values, nans, sums, row, counters);
}

}  // namespace graphprobe::stats
