#pragma once
// A record table: the rows of one device.
//
// One implementation per kind of device: host rows for CPU
// (engine/cpu_table.cpp), fused kernels for CUDA (engine/cuda_table_cuda.cpp)
// and aten ops for other accelerators (engine/aten_table.cpp, the NPU). The
// probes write rows there (also when captured into a graph and replayed);
// step() brings the used rows back with one copy per device. Device rows
// never move once handed out, because a captured graph keeps their addresses
// for its whole life.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "record/row.h"

namespace graphprobe {

class DeviceTable {
 public:
  virtual ~DeviceTable() = default;
  // Hands out the next row; allowed while the current stream is capturing.
  virtual int64_t add_row() = 0;
  // Launches the statistics of `x` into `row` on the current stream, and
  // with `checksum` its checksum (stats/checksum.h) where this device has a
  // kernel for it (column::kHashed says whether it was computed); with
  // `sketch` the Sketch (stats/sketch.h) where it costs a separate read
  // (a device whose kernel computes it in its one pass ignores the flag).
  virtual void record(const at::Tensor& x, int64_t row, bool checksum, bool sketch) = 0;
  // Launches the copy of precomputed statistics (a float64 vector of
  // max, min, sum, sum of squares, NaN count on this device) into `row`,
  // stamping it like record(); such a row has no checksum.
  virtual void write_values(const at::Tensor& values, int64_t row) = 0;
  // Waits for the device, then copies every row handed out so far to the host.
  virtual std::vector<Row> fetch() = 0;
  // fetch() into `out`, reusing its memory where the table can. step() runs
  // on the caller's thread right after a forward, and there the first large
  // allocation costs more than the copy: glibc first consolidates the small
  // chunks that the forward freed (issue 39).
  virtual void fetch_into(std::vector<Row>& out) { out = fetch(); }
  // Sets the epoch that later kernels stamp into the rows they write.
  virtual void set_epoch(int64_t epoch) = 0;
  // The live switch read by every kernel, captured ones included.
  virtual void set_enabled(bool enabled) = 0;
  // On reset(): drops every row when no captured graph can write them (host
  // rows) and returns true; device tables keep theirs (retired, never reused).
  virtual bool forget_rows() { return false; }
};

// The table for `device` (its runtime registered): `epoch` and `enabled` as
// for make_cuda_table.
std::unique_ptr<DeviceTable> make_table(c10::Device device, int64_t epoch, bool enabled);

std::unique_ptr<DeviceTable> make_cpu_table(int64_t epoch);

// An accelerator without kernels of graphprobe's own (the NPU): statistics
// composed of aten ops, rows in memory from the device's runtime.
std::unique_ptr<DeviceTable> make_aten_table(c10::Device device, int64_t epoch, bool enabled);

// Defined in the CUDA sources; without CUDA no CUDA tensor can reach the
// engine, and these report a clear error instead. `enabled` is the live
// switch's initial value; allowed while a stream is capturing.
std::unique_ptr<DeviceTable> make_cuda_table(int device_index, int64_t epoch, bool enabled);

}  // namespace graphprobe
