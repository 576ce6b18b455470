#pragma once
// A record table that lives in an accelerator's memory.
//
// The probe kernels write rows there (also when captured into a graph and
// replayed); step() brings the used rows back with one copy per device.
// Rows never move once handed out, because a captured graph keeps their
// addresses for its whole life.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/row.h"

namespace graphprobe {

class DeviceTable {
 public:
  virtual ~DeviceTable() = default;
  // Hands out the next row; allowed while the current stream is capturing.
  virtual int64_t add_row() = 0;
  virtual int64_t rows() const = 0;
  // Launches the statistics of `x` into `row` on the current stream.
  virtual void record(const at::Tensor& x, int64_t row) = 0;
  // Launches the copy of precomputed statistics (a float64 vector of
  // max, min, sum, sum of squares, NaN count on this device) into `row`,
  // stamping it like record().
  virtual void write_values(const at::Tensor& values, int64_t row) = 0;
  // Waits for the device, then copies rows [0, rows()) to the host.
  virtual std::vector<Row> fetch() = 0;
  // Sets the epoch that later kernels stamp into the rows they write.
  virtual void set_epoch(int64_t epoch) = 0;
  // The live switch read by every kernel, captured ones included.
  virtual void set_enabled(bool enabled) = 0;
};

// Whether the current stream of `x`'s device is being captured into a graph.
bool is_capturing(const at::Tensor& x);

// The id of the graph capture under way on the current CUDA stream, 0 when
// none (always 0 without CUDA).
uint64_t current_capture_id();

// Defined in the CUDA sources; without CUDA no CUDA tensor can reach the
// engine, and these report a clear error instead. `enabled` is the live
// switch's initial value; allowed while a stream is capturing.
std::unique_ptr<DeviceTable> make_cuda_table(int device_index, int64_t epoch, bool enabled);

}  // namespace graphprobe
