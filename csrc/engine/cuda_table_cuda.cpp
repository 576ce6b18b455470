// The CUDA record table: rows in chunks of device memory that never move.
//
// Memory comes from cudaMalloc, not from torch's caching allocator: an
// allocation made while a stream is capturing would otherwise land in that
// graph's private pool and die with the graph, while the table must outlive
// every graph that writes into it.

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "capture/capture_mode.h"
#include "engine/device_table.h"
#include "engine/row_write_cuda.h"
#include "runtime/devices_used.h"
#include "stats/stats_cuda.h"

namespace graphprobe {
namespace {

constexpr int64_t kChunkRows = 4096;

struct CudaFree {
  void operator()(void* p) const {
    if (p) (void)cudaFree(p);
  }
};
using DeviceMemory = std::unique_ptr<void, CudaFree>;

struct StreamDestroy {
  void operator()(CUstream_st* s) const {
    if (s) (void)cudaStreamDestroy(s);
  }
};

// Device state read by the kernels: the current epoch, the last sequence
// number handed out, and the live switch.
struct Counters {
  int64_t epoch;
  unsigned long long seq;
  int64_t enabled;
};

class CudaTable final : public DeviceTable {
 public:
  // May run while a stream of `device` is capturing (the first probe of a
  // device can be inside a capture): nothing here checks for capture, and
  // every CUDA call is allowed in relaxed mode.
  CudaTable(int device, int64_t epoch, bool enabled) : device_(device), enabled_(enabled) {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    const capture::RelaxedCaptureMode relaxed;
    note_device_used(device_);
    cudaStream_t side = nullptr;
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    side_.reset(side);
    counters_ = allocate_zeroed(sizeof(Counters));
    write_counter(offsetof(Counters, epoch), epoch);
    write_counter(offsetof(Counters, enabled), enabled ? 1 : 0);
  }

  int64_t add_row() override {
    const std::lock_guard<std::mutex> lock(mu_);
    if (rows_ == static_cast<int64_t>(chunks_.size()) * kChunkRows) {
      const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
      const capture::RelaxedCaptureMode relaxed;
      chunks_.push_back(allocate_zeroed(sizeof(Row) * kChunkRows));
    }
    return rows_++;
  }

  void record(const at::Tensor& x, int64_t row, bool checksum, bool /*sketch: computed in the one pass*/) override {
    auto* c = static_cast<Counters*>(counters_.get());
    launch_stats_cuda(x, row_address(row), &c->epoch, &c->seq, &c->enabled, checksum);
  }

  void write_values(const at::Tensor& values, int64_t row) override {
    auto* c = static_cast<Counters*>(counters_.get());
    launch_write_values_cuda(values, row_address(row), &c->epoch, &c->seq, &c->enabled);
  }

  std::vector<Row> fetch() override {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    check_not_capturing("step()");
    C10_CUDA_CHECK(cudaDeviceSynchronize());
    const std::lock_guard<std::mutex> lock(mu_);
    std::vector<Row> out(static_cast<size_t>(rows_));
    for (int64_t start = 0; start < rows_; start += kChunkRows) {
      const int64_t n = std::min(kChunkRows, rows_ - start);
      C10_CUDA_CHECK(cudaMemcpy(out.data() + start, chunks_[static_cast<size_t>(start / kChunkRows)].get(),
                                sizeof(Row) * n, cudaMemcpyDeviceToHost));
    }
    return out;
  }

  void set_enabled(bool enabled) override {
    if (enabled == enabled_) return;
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    check_not_capturing("the live switch (enable())");
    // Replays still queued must finish under the value they started with:
    // otherwise a row's begin_row may run and its accumulate_row skip, and
    // the row is reported with Max=-inf, Min=inf.
    C10_CUDA_CHECK(cudaDeviceSynchronize());
    write_counter(offsetof(Counters, enabled), enabled ? 1 : 0);
    enabled_ = enabled;
  }

  void set_epoch(int64_t epoch) override {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    check_not_capturing("step()");
    // Work still queued from earlier replays must stamp the old epoch.
    C10_CUDA_CHECK(cudaDeviceSynchronize());
    write_counter(offsetof(Counters, epoch), epoch);
  }

 private:
  void check_not_capturing(const char* what) {
    const capture::CaptureStatus status =
        capture::stream_capture_status(c10::cuda::getCurrentCUDAStream(device_).stream());
    TORCH_CHECK(!capture::counts_as_capturing(status), "graphprobe: ", what, " was called while the current stream of ",
                "cuda:", device_, " is ", capture::describe(status),
                "; call it after the capture has ended, once per replayed iteration");
  }

  // The address of `row`. Under the lock: another thread's add_row() may be
  // growing the chunk list (the chunks themselves never move).
  double* row_address(int64_t row) {
    const std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(row >= 0 && row < rows_, "graphprobe: internal error: row ", row, " of cuda:", device_,
                " was not handed out (", rows_, " rows)");
    return static_cast<double*>(chunks_[static_cast<size_t>(row / kChunkRows)].get()) +
           (row % kChunkRows) * column::kNumColumns;
  }

  DeviceMemory allocate_zeroed(size_t bytes) {
    void* p = nullptr;
    C10_CUDA_CHECK(cudaMalloc(&p, bytes));
    DeviceMemory mem(p);
    // A side stream of our own: the legacy stream would synchronise with (and
    // so invalidate) a capture under way on a blocking stream.
    C10_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, side_.get()));
    C10_CUDA_CHECK(cudaStreamSynchronize(side_.get()));
    return mem;
  }

  // Writes one counter through the side stream and waits for it. Checks
  // nothing: callers order it after queued work where that matters.
  void write_counter(size_t offset, int64_t value) {
    char* base = static_cast<char*>(counters_.get());
    C10_CUDA_CHECK(cudaMemcpyAsync(base + offset, &value, sizeof(value), cudaMemcpyHostToDevice, side_.get()));
    C10_CUDA_CHECK(cudaStreamSynchronize(side_.get()));
  }

  const int device_;
  bool enabled_;  // the value last written to the device; changed under the engine's lock
  std::unique_ptr<CUstream_st, StreamDestroy> side_;
  DeviceMemory counters_;
  mutable std::mutex mu_;  // guards chunks_ and rows_
  std::vector<DeviceMemory> chunks_;
  int64_t rows_ = 0;
};

}  // namespace

std::unique_ptr<DeviceTable> make_cuda_table(int device_index, int64_t epoch, bool enabled) {
  return std::make_unique<CudaTable>(device_index, epoch, enabled);
}

}  // namespace graphprobe
