#pragma once
// The bounded asynchronous writer behind acl_save.
//
// Producers (the save op's body on CPU and on eager CUDA, and the host
// callback that a captured CUDA graph runs on every replay) hand over host
// copies of tensors; one writer thread serialises them as `.pt` files
// (torch::pickle_save, loadable by torch.load) and writes them atomically.
//
// Memory is bounded by a byte budget for data in flight: a producer first
// reserves the bytes of its copy and waits while the budget is full, so that
// nothing is ever dropped and a fast producer cannot grow host memory without
// bound. Errors on the writer thread are kept and reported by flush(); the
// thread survives them.
//
// The writer is one per process and never destroyed: a CUDA graph captured
// with a save point may replay (and call into the writer) at any time, even
// while static destructors run at exit. shutdown() (called from Python's
// atexit) drains the queue and joins the thread.

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace graphprobe {
template <class T>
class Immortal;
}

namespace graphprobe::writer {

// 256 MiB: large enough that a model's activations stream without stalls,
// small enough to leave host memory for the job itself.
constexpr size_t kDefaultBudgetBytes = size_t{256} << 20;

// Who waits for budget. A graph's host callback runs on a CUDA driver thread
// and blocks its stream while it waits; it must therefore not wait for bytes
// whose device copy is still queued on a stream (possibly behind the callback
// itself): that would be a cycle. See Writer::reserve.
enum class Producer { kHost, kDeviceCallback };

// Completion of a device-to-host copy the job's bytes depend on (eager CUDA).
class DeviceReady {
 public:
  virtual ~DeviceReady() = default;
  // Called on the writer thread before done(), and so before any device call
  // the writer makes for this job (done(), destroying this object, freeing
  // the job's pinned memory). The CUDA kind makes the job's device current
  // and relaxes the thread's capture mode (writer/device_thread.h).
  virtual void prepare_thread() {}
  // Non-blocking: whether the copy has finished. Throws on a device error.
  virtual bool done() = 0;
};

class Writer;

// Bytes reserved in the budget, released on destruction unless handed to the
// writer with the job (submit). Keeps the budget right when filling the copy
// throws.
class Reservation {
 public:
  Reservation() = default;
  Reservation(Writer* w, size_t bytes, bool device_pending) : w_(w), bytes_(bytes), device_pending_(device_pending) {}
  Reservation(Reservation&& o) noexcept { *this = std::move(o); }
  Reservation& operator=(Reservation&& o) noexcept;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation();
  size_t bytes() const { return bytes_; }

 private:
  friend class Writer;
  Writer* w_ = nullptr;
  size_t bytes_ = 0;
  bool device_pending_ = false;
};

// One file to write. The bytes are either a host tensor (CPU or pinned), a
// plain byte buffer with its dtype and shape (from a graph's host callback,
// which must not call into the dispatcher), a finished document (`text`)
// written as it is, or an `action` that produces its files itself.
struct WriteJob {
  std::string file;  // final name, {stem}_{n}{suffix}
  std::string text;  // a document; used when `is_document`
  bool is_document = false;
  int64_t records = 0;  // tensor records the file holds: counted as lost if it fails
  at::Tensor tensor;
  std::vector<std::byte> bytes;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes;
  std::unique_ptr<DeviceReady> ready;  // null when the bytes are already on the host
  // Work done on the writer thread instead of writing bytes: the end of a
  // step (its folders, tensor files and dump.json; engine/step_output.cpp).
  // It starts only once every job submitted before it has finished, so it
  // sees their files; jobs submitted after it wait for it. What it throws is
  // kept like a failed write of `file`, with `records` lost.
  std::function<void()> action;
};

// A queued job with its share of the budget. Held by unique_ptr so that the
// writer thread can look at an entry without the lock while producers append.
struct Entry {
  WriteJob job;
  size_t bytes = 0;
  bool device_pending = false;
  int64_t seq = 0;  // submission number
};

// The writer's budget and counters, for writer_stats() and the tests
// (not tensor statistics: those are the columns of a Row, record/row.h).
struct Counters {
  size_t budget_bytes = 0;
  size_t bytes_in_flight = 0;
  size_t peak_bytes_in_flight = 0;
  int64_t files_written = 0;
  int64_t failed_writes = 0;  // since the process started
  int64_t failed_records = 0; // tensor records in documents that failed, or never saved (count_lost_records)
  int64_t pending = 0;        // jobs submitted and not yet finished
};

class Writer {
 public:
  static Writer& get();

  // Waits until `bytes` fit in the budget, then reserves them. A single job
  // larger than the whole budget is admitted once nothing else is in flight
  // (waiting for it to fit would never end).
  Reservation reserve(size_t bytes, Producer who, bool device_pending);

  // `path` with the next execution number of that path: `dir/act.pt` ->
  // `dir/act_{n}.pt`. Called when the data is taken (execution time).
  std::string next_file(const std::string& path);

  // Returns the job's submission number (see wait_for).
  int64_t submit(Reservation r, WriteJob job);

  // Waits until job `seq` (and nothing else) has finished.
  void wait_for(int64_t seq);

  // The failures since the last report, without waiting; empty when none.
  std::string take_errors();

  // Keeps a failure to write `file` for the next report (flush(),
  // take_errors()), as the writer thread does for its own; `records` tensor
  // records are counted as lost. For files moved or written outside the
  // writer thread (the tensor task's filing at step()).
  void record_error(const std::string& file, const std::string& what, int64_t records = 0);

  // Counts `records` tensor records whose file was never queued (the tensor
  // task skips a dtype no file can hold, and warns itself): they add to
  // Counters::failed_records, but are no failed write to report.
  void count_lost_records(int64_t records);

  // The whole path of a host callback: reserve, copy `size` bytes from
  // `data` (a pinned staging buffer), number, enqueue. No CUDA calls; never
  // throws (errors are kept for flush()).
  void submit_from_callback(const std::string& path, bool numbered, c10::ScalarType dtype,
                            const std::vector<int64_t>& sizes,
                            const void* data, size_t size) noexcept;

  // Waits until every job submitted before the call is written, then throws
  // fs::IoError describing the writes that failed since the last flush().
  void flush();

  // Drops the queued file jobs submitted after job `after_seq` whose file
  // name starts with `prefix` and whose bytes are already on the host (a job
  // still waiting for a device copy keeps its pinned memory until the copy
  // ends, so it is left to be written). Actions and documents are never
  // dropped. For interpreter exit with a tensor-task step never finished:
  // its staged tensors would be written only to be deleted, and writing them
  // delayed the exit by seconds. Returns how many jobs were dropped.
  int64_t cancel(const std::string& prefix, int64_t after_seq);

  // flush() without throwing, then stops and joins the thread. Returns the
  // unreported error text (empty when none). A later submit restarts it.
  std::string shutdown();

  void set_budget(size_t bytes);
  Counters counters();
  void reset_peak();

 private:
  friend class Reservation;
  template <class T>
  friend class graphprobe::Immortal;
  Writer();

  // fork(): the child has no writer thread; see after_fork_in_child.
  static void before_fork();
  static void after_fork_in_parent();
  static void after_fork_in_child();

  void release(size_t bytes, bool device_pending);
  void run();
  void write_one(WriteJob& job);
  void ensure_thread_locked();
  std::string take_errors_locked(int64_t* count);

  std::mutex mu_;
  std::condition_variable work_cv_;   // writer thread: a job arrived / stop
  std::condition_variable space_cv_;  // producers: budget freed
  std::condition_variable done_cv_;   // flush(): a job finished
  std::deque<std::unique_ptr<Entry>> queue_;
  // Jobs not yet finished, by submission number: flush() waits for those
  // submitted before it was called, not for later ones.
  std::set<int64_t> outstanding_;
  std::thread thread_;
  bool stop_ = false;
  bool joining_ = false;  // shutdown() is joining the thread

  size_t budget_ = kDefaultBudgetBytes;
  size_t in_flight_ = 0;       // reserved and not yet written
  size_t device_pending_ = 0;  // part of in_flight_ still waiting for a device copy
  size_t peak_ = 0;
  int64_t submitted_ = 0;
  int64_t files_written_ = 0;
  int64_t failed_ = 0;
  int64_t failed_records_ = 0;

  // Failures since the last flush(): a count and the first few messages.
  int64_t unreported_ = 0;
  std::vector<std::string> messages_;

  std::unordered_map<std::string, int64_t> counters_;  // path -> executions so far
};

// `dir/act.pt` + n -> `dir/act_{n}.pt`; a name without suffix gets `_{n}`.
std::string numbered_name(const std::string& path, int64_t n);

}  // namespace graphprobe::writer
