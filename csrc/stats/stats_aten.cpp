#include "stats/stats_aten.h"

#include <ATen/ATen.h>

#include <limits>

#include "record/row.h"
#include "stats/reducible_types.h"

namespace graphprobe::stats {

namespace {

// Stamps `row` and writes `values` (float32 [4]) and `nans` (int32 [1]) into
// it, all on the device, unless the live switch reads 0.
void write_row(const at::Tensor& values, const at::Tensor& nans, const at::Tensor& row, const at::Tensor& counters) {
  const at::Tensor epoch = counters.narrow(0, 0, 1);
  const at::Tensor seq = counters.narrow(0, 1, 1);
  const at::Tensor enabled = counters.narrow(0, 2, 1);
  // The sequence advances by the switch (1 or 0), on the device.
  seq.add_(enabled);
  const at::Tensor stamp_old = row.narrow(0, column::kStamp, 1);
  const at::Tensor writes =
      at::where(stamp_old.eq(epoch), row.narrow(0, column::kWrites, 1).add(1), at::ones({1}, row.options()));
  const at::Tensor next = at::cat({values.contiguous().view(at::kInt), nans, epoch, seq, writes});
  row.copy_(at::where(enabled.ne(0), next, row));
}

}  // namespace

void write_values_aten(const at::Tensor& values, const at::Tensor& row, const at::Tensor& counters) {
  const at::Tensor v = values.to(at::kFloat);
  write_row(v.narrow(0, column::kMax, 4), v.narrow(0, column::kNanCount, 1).to(at::kInt), row, counters);
}

void record_row_aten(const at::Tensor& x, const at::Tensor& row, const at::Tensor& counters) {
  const auto f32 = x.options().dtype(at::kFloat);
  const auto i32 = x.options().dtype(at::kInt);
  at::Tensor values;  // float32 [4]: max, min, sum, sum of squares
  at::Tensor nans;    // int32 [1]
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
  } else {
    // Only the row's stamp matters: its record carries no statistics.
    values = at::zeros({4}, f32);
    nans = at::zeros({1}, i32);
  }
  write_row(values, nans, row, counters);
}

}  // namespace graphprobe::stats
