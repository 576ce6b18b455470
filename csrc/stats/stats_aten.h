#pragma once
// Statistics composed of aten ops, for accelerators without kernels of
// graphprobe's own (the NPU). Every step is an ordinary device op, so a graph
// capture (an ACL graph) records them with the model and replays them.
//
// Accumulation is in float32: NPU hardware has no float64.

#include <ATen/core/Tensor.h>

namespace graphprobe::stats {

// The 32-bit words of a device row (a Row's columns, record/row.h): max, min,
// sum and sum of squares are float32 bit patterns; NaN count, stamp,
// sequence and write count are int32; then the Sketch's four sums as
// float32 bit patterns (NaN where not computed).
constexpr int64_t kDeviceRowWords = 12;
constexpr int64_t kDeviceSketchWord = 8;  // the first of the Sketch's four words

// Writes x's statistics into `row` (int32 [kDeviceRowWords], a view of a
// device table) with device ops only, and with `sketch` the Sketch
// (stats/sketch.h) of a floating x. `counters` (int32 [3]: epoch, last
// sequence number, live switch) lives on the same device; the sequence
// number is advanced on the device, and while the switch reads 0 neither
// row nor counter changes.
void record_row_aten(const at::Tensor& x, const at::Tensor& row, const at::Tensor& counters, bool sketch);

// Writes precomputed statistics (`values`: max, min, sum, sum of squares,
// NaN count, then optionally the Sketch's four sums, on the table's device;
// any floating dtype) into `row`, stamped as record_row_aten stamps.
void write_values_aten(const at::Tensor& values, const at::Tensor& row, const at::Tensor& counters);

}  // namespace graphprobe::stats
