// The record table of an accelerator reached through its runtime only (the
// NPU): rows of 32-bit words in chunks of device memory that never move,
// written by aten ops (stats/stats_aten.cpp), brought back with one copy per
// chunk at step().
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "engine/device_table.h"
#include "runtime/device_runtime.h"
#include "stats/stats_aten.h"

namespace graphprobe {
namespace {

constexpr int64_t kChunkRows = 4096;
constexpr int64_t kEpoch = 0, kEnabled = 2, kCounterWords = 3;

class AtenTable final : public DeviceTable {
 public:
  // May run while a stream of `device` captures: the runtime allocates
  // outside any graph's pool.
  AtenTable(c10::Device device, int64_t epoch, bool enabled)
      : rt_(runtime::runtime_for(device.type())), device_(device), enabled_(enabled) {
    counters_ = allocate(kCounterWords);
    write_counter(kEpoch, epoch);
    write_counter(kEnabled, enabled ? 1 : 0);
  }

  int64_t add_row() override {
    const std::lock_guard<std::mutex> lock(mu_);
    if (rows_ == static_cast<int64_t>(chunks_.size()) * kChunkRows) {
      chunks_.push_back(allocate(kChunkRows * stats::kDeviceRowWords).view({kChunkRows, stats::kDeviceRowWords}));
    }
    return rows_++;
  }

  // No checksum kernel composed of aten ops (docs/formats.md): `checksum` is
  // ignored and the record's md5 is null. The Sketch costs ops of its own
  // here, so `sketch` (statistics.sketch) is honoured.
  void record(const at::Tensor& x, int64_t row, bool /*checksum*/, bool sketch) override {
    const at::Tensor r = row_view(row);
    const c10::DeviceGuard guard(device_);
    stats::record_row_aten(x, r, counters_, sketch);
  }

  void write_values(const at::Tensor& values, int64_t row) override {
    const at::Tensor r = row_view(row);
    const c10::DeviceGuard guard(device_);
    stats::write_values_aten(values, r, counters_);
  }

  std::vector<Row> fetch() override {
    check_not_capturing("step()");
    rt_.synchronize(device_.index());
    const std::lock_guard<std::mutex> lock(mu_);
    std::vector<Row> out(static_cast<size_t>(rows_));
    std::vector<int32_t> words(static_cast<size_t>(kChunkRows * stats::kDeviceRowWords));
    for (int64_t start = 0; start < rows_; start += kChunkRows) {
      const int64_t n = std::min(kChunkRows, rows_ - start);
      rt_.copy_to_host(device_.index(), words.data(), chunks_[static_cast<size_t>(start / kChunkRows)].const_data_ptr(),
                       sizeof(int32_t) * static_cast<size_t>(n * stats::kDeviceRowWords));
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(start + i)] = to_row(&words[static_cast<size_t>(i * stats::kDeviceRowWords)]);
    }
    return out;
  }

  void set_enabled(bool enabled) override {
    if (enabled == enabled_) return;
    check_not_capturing("the live switch (enable())");
    // Replays still queued must finish under the value they started with.
    rt_.synchronize(device_.index());
    write_counter(kEnabled, enabled ? 1 : 0);
    enabled_ = enabled;
  }

  void set_epoch(int64_t epoch) override {
    check_not_capturing("step()");
    // Work still queued from earlier replays must stamp the old epoch.
    rt_.synchronize(device_.index());
    write_counter(kEpoch, epoch);
  }

 private:
  // Row `row` as int32 [stats::kDeviceRowWords]. Under the lock: another thread's add_row() may
  // be growing the chunk list (the chunks themselves never move).
  at::Tensor row_view(int64_t row) {
    const std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(row >= 0 && row < rows_, "graphprobe: internal error: row ", row, " of ", device_,
                " was not handed out (", rows_, " rows)");
    return chunks_[static_cast<size_t>(row / kChunkRows)].select(0, row % kChunkRows);
  }

  // Never an inference tensor: the first probe may run under
  // torch.inference_mode (vLLM serves under it), and later probes outside it
  // must still update the table in place.
  at::Tensor allocate(int64_t words) {
    const c10::InferenceMode not_inference(/*enabled=*/false);
    return rt_.allocate_table(device_.index(), words);
  }

  // A device row holds the columns up to column::kWrites, then the Sketch's
  // four (stats/stats_aten.h); the checksum columns stay 0 (none computed).
  static Row to_row(const int32_t* w) {
    Row r{};
    for (int c = column::kMax; c <= column::kSumSq; ++c) {
      float f = 0;
      std::memcpy(&f, &w[c], sizeof(f));
      r.v[c] = f;
    }
    for (int c = column::kNanCount; c <= column::kWrites; ++c) r.v[c] = w[c];
    for (int k = 0; k < column::kSketch3 - column::kSketch0 + 1; ++k) {
      float f = 0;
      std::memcpy(&f, &w[stats::kDeviceSketchWord + k], sizeof(f));
      r.v[column::kSketch0 + k] = f;  // NaN where the row has none
    }
    return r;
  }

  void check_not_capturing(const char* what) {
    const capture::CaptureStatus status = rt_.capture_status(device_.index());
    TORCH_CHECK(!capture::counts_as_capturing(status), "graphprobe: ", what, " was called while the current stream of ",
                device_, " is capturing a graph; call it after the capture has ended, once per replayed iteration");
  }

  // Epochs and the switch fit in int32: an epoch per step.
  void write_counter(int64_t word, int64_t value) {
    const auto v = static_cast<int32_t>(value);
    rt_.copy_to_device(device_.index(), static_cast<int32_t*>(counters_.data_ptr()) + word, &v, sizeof(v));
  }

  runtime::DeviceRuntime& rt_;
  const c10::Device device_;
  bool enabled_;  // the value last written to the device; changed under the engine's lock
  at::Tensor counters_;  // int32 [3]: epoch, last sequence number, live switch
  mutable std::mutex mu_;  // guards chunks_ and rows_
  std::vector<at::Tensor> chunks_;  // int32 [kChunkRows, stats::kDeviceRowWords] each
  int64_t rows_ = 0;
};

}  // namespace

std::unique_ptr<DeviceTable> make_aten_table(c10::Device device, int64_t epoch, bool enabled) {
  return std::make_unique<AtenTable>(device, epoch, enabled);
}

}  // namespace graphprobe
