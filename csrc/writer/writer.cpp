#include "writer/writer.h"

#include <pthread.h>
#include <sched.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>

#include "fs/atomic_file.h"
#include "util/immortal.h"
#include "writer/save_file.h"

namespace graphprobe::writer {
namespace {

// At most this many failure messages are kept between two flush() calls; the
// count covers the rest.
constexpr size_t kKeptMessages = 8;

// How long the writer sleeps when every queued job still waits for a device
// copy. It polls instead of blocking on one copy because a job queued behind
// an unfinished copy may be what a graph's host callback waits for.
constexpr std::chrono::microseconds kDevicePoll{100};

}  // namespace

// ---------------------------------------------------------------- Reservation

Reservation& Reservation::operator=(Reservation&& o) noexcept {
  if (this != &o) {
    if (w_) w_->release(bytes_, device_pending_);
    w_ = std::exchange(o.w_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    device_pending_ = std::exchange(o.device_pending_, false);
  }
  return *this;
}

Reservation::~Reservation() {
  if (w_) w_->release(bytes_, device_pending_);
}

// ---------------------------------------------------------------- naming

std::string numbered_name(const std::string& path, int64_t n) {
  const size_t slash = path.find_last_of('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = path.find_last_of('.');
  // Like os.path.splitext: dots that only lead the base name (".hidden")
  // start no suffix.
  if (dot != std::string::npos) {
    if (dot < base || path.find_first_not_of('.', base) >= dot) dot = std::string::npos;
  }
  const std::string number = "_" + std::to_string(n);
  if (dot == std::string::npos) return path + number;
  return path.substr(0, dot) + number + path.substr(dot);
}

// ---------------------------------------------------------------- Writer

Writer::Writer() {
  // Registered once, with the process-lifetime writer.
  ::pthread_atfork(&Writer::before_fork, &Writer::after_fork_in_parent, &Writer::after_fork_in_child);
}

// Holding the mutex across fork() makes the child's copy of the writer state
// consistent (no half-done update by another thread).
void Writer::before_fork() { get().mu_.lock(); }
void Writer::after_fork_in_parent() { get().mu_.unlock(); }

void Writer::after_fork_in_child() {
  // Only the forking thread exists in the child: the writer thread and any
  // producer or flush() waiting in the parent are gone. The parent writes the
  // jobs it queued; the child starts with an empty writer (numbering and the
  // budget carry over). The parent's objects are abandoned, not destroyed:
  // destroying them would join a thread that does not exist here, or free
  // CUDA events and pinned blocks that belong to the parent's context.
  Writer& w = get();
  for (auto& e : w.queue_) (void)e.release();  // deliberately leaked, see above
  w.queue_.clear();
  w.outstanding_.clear();
  w.in_flight_ = 0;
  w.device_pending_ = 0;
  w.peak_ = 0;
  w.submitted_ = 0;
  w.unreported_ = 0;
  w.messages_.clear();
  w.stop_ = false;
  w.joining_ = false;
  ::new (static_cast<void*>(&w.thread_)) std::thread();  // forget the parent's thread without joining it
  ::new (static_cast<void*>(&w.work_cv_)) std::condition_variable();  // no waiters can exist here
  ::new (static_cast<void*>(&w.space_cv_)) std::condition_variable();
  ::new (static_cast<void*>(&w.done_cv_)) std::condition_variable();
  w.mu_.unlock();  // locked by before_fork(), in this very thread
}

Writer& Writer::get() {
  static Immortal<Writer> w;
  return w.get();
}

Reservation Writer::reserve(size_t bytes, Producer who, bool device_pending) {
  std::unique_lock<std::mutex> lock(mu_);
  space_cv_.wait(lock, [&] {
    // A host callback counts only bytes already on the host: the others may
    // be waiting for a copy queued behind the callback on its own stream.
    const size_t counted = who == Producer::kHost ? in_flight_ : in_flight_ - device_pending_;
    return counted == 0 || counted + bytes <= budget_;
  });
  in_flight_ += bytes;
  if (device_pending) device_pending_ += bytes;
  peak_ = std::max(peak_, in_flight_);
  return Reservation(this, bytes, device_pending);
}

void Writer::release(size_t bytes, bool device_pending) {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    in_flight_ -= bytes;
    if (device_pending) device_pending_ -= bytes;
  }
  space_cv_.notify_all();
}

std::string Writer::next_file(const std::string& path) {
  int64_t n = 0;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    n = counters_[path]++;
  }
  return numbered_name(path, n);
}

int64_t Writer::submit(Reservation r, WriteJob job) {
  auto entry = std::make_unique<Entry>();
  int64_t seq = 0;
  entry->job = std::move(job);
  {
    const std::lock_guard<std::mutex> lock(mu_);
    // First: if no thread can be started this throws with nothing queued,
    // and the reservation returns its bytes.
    ensure_thread_locked();
    entry->bytes = r.bytes_;
    entry->device_pending = r.device_pending_;
    r.w_ = nullptr;  // the bytes now belong to the queued job
    entry->seq = seq = submitted_++;
    outstanding_.insert(entry->seq);
    queue_.push_back(std::move(entry));
  }
  work_cv_.notify_one();
  return seq;
}

void Writer::wait_for(int64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return outstanding_.count(seq) == 0; });
}

std::string Writer::take_errors() {
  const std::lock_guard<std::mutex> lock(mu_);
  int64_t count = 0;
  return take_errors_locked(&count);
}

void Writer::submit_from_callback(const std::string& path, bool numbered, c10::ScalarType dtype,
                                  const std::vector<int64_t>& sizes,
                                  const void* data, size_t size) noexcept {
  // Runs on a CUDA driver thread: no CUDA calls, no Python, no exception may
  // escape into the driver.
  try {
    Reservation r = reserve(size, Producer::kDeviceCallback, /*device_pending=*/false);
    WriteJob job;
    const auto* p = static_cast<const std::byte*>(data);
    job.bytes.assign(p, p + size);
    job.dtype = dtype;
    job.sizes = sizes;
    job.file = numbered ? next_file(path) : path;
    submit(std::move(r), std::move(job));
  } catch (const std::exception& e) {
    record_error(path, e.what());
  } catch (...) {
    record_error(path, "unknown error in the CUDA graph host callback");
  }
}

void Writer::ensure_thread_locked() {
  if (thread_.joinable() || joining_) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void Writer::run() {
  // A background thread: when a producer (step(), a probe) wakes it, it must
  // not preempt that producer on its own core (SCHED_BATCH: no wake-up
  // preemption, same CPU share). Not being allowed to is harmless.
  const sched_param batch{};
  (void)::pthread_setschedparam(::pthread_self(), SCHED_BATCH, &batch);
  for (;;) {
    // A snapshot of the queue, oldest first: whether each job's bytes are on
    // the host already or still wait for a device copy.
    struct Seen {
      Entry* entry;
      int64_t seq;  // identifies the job again under the lock (see below)
      bool on_host;
    };
    std::vector<Seen> snapshot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      for (auto& e : queue_) {
        // An action waits for everything before it (and holds back what
        // follows it) until it is the oldest job.
        if (e->job.action && e != queue_.front()) break;
        snapshot.push_back({e.get(), e->seq, e->job.ready == nullptr});
        if (snapshot.back().on_host) break;  // nothing after it can be older
      }
    }
    // The oldest job whose data is on the host. Jobs are written in order,
    // except that one still waiting for its device copy does not hold back
    // later ones (a graph's host callback may be waiting for their budget,
    // on the very stream the copy is queued on). Device copies are polled
    // without the lock: the CUDA runtime may hold internal locks while a host
    // callback runs, and that callback may be waiting for this mutex.
    // Entries are removed by this thread and by cancel(); cancel() removes
    // only jobs already on the host (no device copy), so the entries polled
    // here stay valid without the lock. An on-host entry may be freed by
    // cancel() meanwhile, and its address reused by a new submission: the
    // chosen job is found again by its sequence number, never by pointer.
    int64_t chosen = -1;
    std::string ready_error;
    for (const Seen& seen : snapshot) {
      if (seen.on_host) {
        chosen = seen.seq;
        break;
      }
      try {
        seen.entry->job.ready->prepare_thread();
        if (seen.entry->job.ready->done()) {
          chosen = seen.seq;
          break;
        }
      } catch (const std::exception& e) {
        chosen = seen.seq;
        ready_error = std::string("the device-to-host copy failed: ") + e.what();
        break;
      }
    }
    if (chosen < 0) {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait_for(lock, kDevicePoll);
      continue;
    }

    std::unique_ptr<Entry> entry;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      auto it = std::find_if(queue_.begin(), queue_.end(), [&](const auto& e) { return e->seq == chosen; });
      if (it == queue_.end()) continue;  // dropped by cancel() meanwhile
      entry = std::move(*it);
      queue_.erase(it);
      if (entry->device_pending) {
        device_pending_ -= entry->bytes;
        entry->device_pending = false;
      }
    }
    entry->job.ready.reset();

    bool ok = false;
    if (ready_error.empty()) {
      try {
        write_one(entry->job);
        ok = true;
      } catch (const std::exception& e) {
        record_error(entry->job.file, e.what(), entry->job.records);
      } catch (...) {
        record_error(entry->job.file, "unknown error", entry->job.records);
      }
    } else {
      record_error(entry->job.file, ready_error, entry->job.records);
    }
    const size_t bytes = entry->bytes;
    const int64_t seq = entry->seq;
    entry.reset();  // free the host copy before its bytes return to the budget
    {
      const std::lock_guard<std::mutex> lock(mu_);
      in_flight_ -= bytes;
      outstanding_.erase(seq);
      if (ok) ++files_written_;
    }
    space_cv_.notify_all();
    done_cv_.notify_all();
  }
}

void Writer::write_one(WriteJob& job) {
  if (job.action) {
    job.action();
    return;
  }
  if (job.is_document) {
    fs::write_file_atomic(job.file, job.text);
    return;
  }
  at::Tensor t = job.tensor;
  if (!t.defined()) {
    const auto options = at::TensorOptions().dtype(job.dtype);
    t = job.bytes.empty() ? at::empty(job.sizes, options) : at::from_blob(job.bytes.data(), job.sizes, options);
  }
  // The same zip format as Python's torch.save: torch.load reads it, also
  // with weights_only=True, for every dtype (writer/save_file.h).
  const std::vector<char> data = tensor_file_bytes(t);
  fs::write_file_atomic(job.file, data.data(), data.size());
}

void Writer::record_error(const std::string& file, const std::string& what, int64_t records) {
  const std::lock_guard<std::mutex> lock(mu_);
  ++failed_;
  failed_records_ += records;
  ++unreported_;
  std::string msg = "'" + file + "': " + what;
  if (records > 0) msg += " (" + std::to_string(records) + " tensor records lost)";
  if (messages_.size() < kKeptMessages) messages_.push_back(std::move(msg));
}

void Writer::count_lost_records(int64_t records) {
  const std::lock_guard<std::mutex> lock(mu_);
  failed_records_ += records;
}

std::string Writer::take_errors_locked(int64_t* count) {
  *count = unreported_;
  if (unreported_ == 0) return {};
  std::string msg = "graphprobe: " + std::to_string(unreported_) +
                    " write(s) failed since the last report; the files named below were not written:";
  for (const auto& m : messages_) msg += "\n  " + m;
  if (unreported_ > static_cast<int64_t>(messages_.size()))
    msg += "\n  ... and " + std::to_string(unreported_ - static_cast<int64_t>(messages_.size())) + " more";
  unreported_ = 0;
  messages_.clear();
  return msg;
}

void Writer::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t target = submitted_;
  done_cv_.wait(lock, [&] { return outstanding_.empty() || *outstanding_.begin() >= target; });
  int64_t count = 0;
  std::string msg = take_errors_locked(&count);
  if (count > 0) throw fs::IoError(msg);
}

int64_t Writer::cancel(const std::string& prefix, int64_t after_seq) {
  std::vector<std::unique_ptr<Entry>> dropped;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      const WriteJob& job = (*it)->job;
      const bool drop = (*it)->seq > after_seq && !job.action && !job.is_document && job.ready == nullptr &&
                        !(*it)->device_pending && job.file.compare(0, prefix.size(), prefix) == 0;
      if (!drop) {
        ++it;
        continue;
      }
      in_flight_ -= (*it)->bytes;
      outstanding_.erase((*it)->seq);
      dropped.push_back(std::move(*it));
      it = queue_.erase(it);
    }
  }
  // The host copies are freed outside the lock, then waiters learn that the
  // budget and the outstanding set changed.
  const auto n = static_cast<int64_t>(dropped.size());
  dropped.clear();
  space_cv_.notify_all();
  done_cv_.notify_all();
  return n;
}

std::string Writer::shutdown() {
  std::thread t;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t target = submitted_;
    done_cv_.wait(lock, [&] { return outstanding_.empty() || *outstanding_.begin() >= target; });
    stop_ = true;
    joining_ = true;
    t = std::move(thread_);
  }
  work_cv_.notify_all();
  // The thread leaves only with an empty queue; a job submitted meanwhile is
  // written first, or (if it came after the thread left) by a new thread
  // started below.
  if (t.joinable()) t.join();
  const std::lock_guard<std::mutex> lock(mu_);
  joining_ = false;
  stop_ = false;
  if (!queue_.empty()) ensure_thread_locked();
  int64_t count = 0;
  return take_errors_locked(&count);
}

void Writer::set_budget(size_t bytes) {
  TORCH_CHECK(bytes > 0, "graphprobe: the acl_save write budget must be a positive number of bytes, got ", bytes);
  {
    const std::lock_guard<std::mutex> lock(mu_);
    budget_ = bytes;
  }
  space_cv_.notify_all();
}

Counters Writer::counters() {
  const std::lock_guard<std::mutex> lock(mu_);
  Counters s;
  s.budget_bytes = budget_;
  s.bytes_in_flight = in_flight_;
  s.peak_bytes_in_flight = peak_;
  s.files_written = files_written_;
  s.failed_writes = failed_;
  s.failed_records = failed_records_;
  s.pending = static_cast<int64_t>(outstanding_.size());
  return s;
}

void Writer::reset_peak() {
  const std::lock_guard<std::mutex> lock(mu_);
  peak_ = in_flight_;
}

}  // namespace graphprobe::writer
