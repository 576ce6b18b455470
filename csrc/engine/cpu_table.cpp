// The CPU record table: host rows, written by the probe's own thread.
#include <c10/util/Exception.h>

#include <array>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>

#include "engine/device_table.h"
#include "stats/reducible_types.h"
#include "runtime/device_runtime.h"
#include "stats/checksum_cpu.h"
#include "stats/sketch_cpu.h"
#include "stats/stats_cpu.h"

namespace graphprobe {
namespace {

class CpuTable final : public DeviceTable {
 public:
  explicit CpuTable(int64_t epoch) : epoch_(epoch) {}

  int64_t add_row() override {
    const std::lock_guard<std::mutex> lock(mu_);
    rows_.push_back(Row{});
    return static_cast<int64_t>(rows_.size()) - 1;
  }

  void record(const at::Tensor& x, int64_t row, bool checksum, bool sketch) override {
    // Reduce before taking the lock: threads probing in parallel only
    // serialise on the short row update below.
    const bool reduced = stats::value_kind(x.scalar_type()) != ValueKind::kNoStats && x.numel() > 0;
    Row stats = reduced ? compute_stats_cpu(x) : Row{};
    // A second read of x, not fused into the vectorised statistics kernels:
    // their loaders feed lanes in an order that loses the element index the
    // signs are defined on (benchmarks/results/sketch_cost.md measures it).
    constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
    const auto sums = sketch ? sketch::sketch_cpu(x) : std::array<double, sketch::kProjections>{kNan, kNan, kNan, kNan};
    for (int k = 0; k < sketch::kProjections; ++k) stats.v[column::kSketch0 + k] = sums[k];
    write(stats.v, row, checksum ? checksum::checksum_cpu(x) : std::nullopt);
  }

  // `values` holds the statistic columns kMax .. kNanCount, followed by the
  // sketch's four when the producer computed them (Engine::record_values).
  void write_values(const at::Tensor& values, int64_t row) override {
    Row r{};
    const double* v = values.const_data_ptr<double>();
    for (int c = column::kMax; c <= column::kNanCount; ++c) r.v[c] = v[c];
    for (int k = 0; k < sketch::kProjections; ++k)
      r.v[column::kSketch0 + k] = values.numel() > column::kNanCount + 1 + k
                                      ? v[column::kNanCount + 1 + k]
                                      : std::numeric_limits<double>::quiet_NaN();
    write(r.v, row, std::nullopt);
  }

  std::vector<Row> fetch() override {
    const std::lock_guard<std::mutex> lock(mu_);
    return std::vector<Row>(rows_.begin(), rows_.end());
  }

  void fetch_into(std::vector<Row>& out) override {
    const std::lock_guard<std::mutex> lock(mu_);
    out.assign(rows_.begin(), rows_.end());
  }

  void set_epoch(int64_t epoch) override {
    const std::lock_guard<std::mutex> lock(mu_);
    epoch_ = epoch;
  }

  // Records made while off return before reaching the table.
  void set_enabled(bool) override {}

  bool forget_rows() override {
    const std::lock_guard<std::mutex> lock(mu_);
    rows_.clear();
    return true;
  }

 private:
  // Stamps `row` and copies the statistic columns (column::kMax ..
  // column::kNanCount) of `stats` and the checksum, if any, into it.
  void write(const double* stats, int64_t row, std::optional<uint64_t> hash) {
    const std::lock_guard<std::mutex> lock(mu_);
    // A row dropped by reset() while this probe reduced: nothing to write.
    if (row < 0 || row >= static_cast<int64_t>(rows_.size())) return;
    Row& r = rows_[static_cast<size_t>(row)];
    const double epoch = static_cast<double>(epoch_);
    r.v[column::kWrites] = r.v[column::kStamp] == epoch ? r.v[column::kWrites] + 1 : 1;
    r.v[column::kStamp] = epoch;
    r.v[column::kSeq] = ++seq_;
    for (int c = column::kMax; c <= column::kNanCount; ++c) r.v[c] = stats[c];
    for (int c = column::kSketch0; c <= column::kSketch3; ++c) r.v[c] = stats[c];
    set_row_checksum(r, hash.value_or(0));
    r.v[column::kHashed] = hash ? 1.0 : 0.0;
  }

  mutable std::mutex mu_;
  std::deque<Row> rows_;  // deque: rows keep their address as it grows
  int64_t epoch_;
  double seq_ = 0;  // execution order among this table's rows; never reset
};

}  // namespace

std::unique_ptr<DeviceTable> make_cpu_table(int64_t epoch) { return std::make_unique<CpuTable>(epoch); }

std::unique_ptr<DeviceTable> make_table(c10::Device device, int64_t epoch, bool enabled) {
  // Asked first: an unsupported device gets the runtime's message.
  (void)runtime::runtime_for(device.type());
  switch (device.type()) {
    case c10::DeviceType::CPU: return make_cpu_table(epoch);
    case c10::DeviceType::CUDA: return make_cuda_table(device.index(), epoch, enabled);
    default: return make_aten_table(device, epoch, enabled);
  }
}

}  // namespace graphprobe
