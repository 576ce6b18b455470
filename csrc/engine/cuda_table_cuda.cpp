// The CUDA record table: rows in chunks of device memory that never move.
//
// Memory comes from cudaMalloc, not from torch's caching allocator: an
// allocation made while a stream is capturing would otherwise land in that
// graph's private pool and die with the graph, while the table must outlive
// every graph that writes into it.

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <memory>
#include <vector>

#include "capture/capture_mode.h"
#include "engine/device_table.h"
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
  CudaTable(int device, int64_t epoch) : device_(device) {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    const capture::RelaxedCaptureMode relaxed;
    cudaStream_t side = nullptr;
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    side_.reset(side);
    counters_ = allocate_zeroed(sizeof(Counters));
    write_epoch(epoch);
    set_enabled(true);
  }

  int64_t add_row() override {
    if (rows_ == static_cast<int64_t>(chunks_.size()) * kChunkRows) {
      const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
      const capture::RelaxedCaptureMode relaxed;
      chunks_.push_back(allocate_zeroed(sizeof(Row) * kChunkRows));
    }
    return rows_++;
  }

  int64_t rows() const override { return rows_; }

  void record(const at::Tensor& x, int64_t row) override {
    double* r = static_cast<double*>(chunks_[static_cast<size_t>(row / kChunkRows)].get()) +
                (row % kChunkRows) * kNumColumns;
    auto* c = static_cast<Counters*>(counters_.get());
    launch_stats_cuda(x, r, &c->epoch, &c->seq, &c->enabled);
  }

  std::vector<Row> fetch() override {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    check_not_capturing();
    C10_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<Row> out(static_cast<size_t>(rows_));
    for (int64_t start = 0; start < rows_; start += kChunkRows) {
      const int64_t n = std::min(kChunkRows, rows_ - start);
      C10_CUDA_CHECK(cudaMemcpy(out.data() + start, chunks_[static_cast<size_t>(start / kChunkRows)].get(),
                                sizeof(Row) * n, cudaMemcpyDeviceToHost));
    }
    return out;
  }

  void set_enabled(bool enabled) override {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    check_not_capturing();
    const int64_t value = enabled ? 1 : 0;
    auto* c = static_cast<Counters*>(counters_.get());
    C10_CUDA_CHECK(cudaMemcpyAsync(&c->enabled, &value, sizeof(value), cudaMemcpyHostToDevice, side_.get()));
    C10_CUDA_CHECK(cudaStreamSynchronize(side_.get()));
  }

  void set_epoch(int64_t epoch) override {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    check_not_capturing();
    // Work still queued from earlier replays must stamp the old epoch.
    C10_CUDA_CHECK(cudaDeviceSynchronize());
    write_epoch(epoch);
  }

 private:
  void check_not_capturing() {
    TORCH_CHECK(!capture::stream_is_capturing(at::cuda::getCurrentCUDAStream(device_).stream()),
                "graphprobe: step() was called while a CUDA graph is being captured on device ", device_,
                "; call it after capture, once per replayed iteration");
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

  void write_epoch(int64_t epoch) {
    C10_CUDA_CHECK(cudaMemcpyAsync(counters_.get(), &epoch, sizeof(epoch), cudaMemcpyHostToDevice, side_.get()));
    C10_CUDA_CHECK(cudaStreamSynchronize(side_.get()));
  }

  int device_;
  std::unique_ptr<CUstream_st, StreamDestroy> side_;
  DeviceMemory counters_;
  std::vector<DeviceMemory> chunks_;
  int64_t rows_ = 0;
};

}  // namespace

std::unique_ptr<DeviceTable> make_cuda_table(int device_index, int64_t epoch) {
  return std::make_unique<CudaTable>(device_index, epoch);
}

}  // namespace graphprobe
