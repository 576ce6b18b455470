#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "format/pt_archive.h"
#include "python/bindings.h"
#include "runtime/devices_used.h"
#include "writer/writer.h"

namespace py = pybind11;

namespace graphprobe::python {
namespace {

// Tests only: a job that holds the writer thread until released, so that
// steps queue up behind it whatever the machine's speed (tests/
// test_step_async.py: step N's rows are still unconverted while step N+1's
// forward records). It gives up after two minutes, so that a failed test
// cannot hang the process.
struct TestHold {
  std::mutex mu;
  std::condition_variable cv;
  // Holds are numbered: a hold queued right after a release must not keep
  // the released job waiting (one flag would be set again before that job
  // wakes up).
  int64_t holds = 0;
  int64_t released = 0;  // every hold up to this number may end
};

TestHold& test_hold() {
  static auto* hold = new TestHold();  // leaked: the writer may still wait on it at exit
  return *hold;
}

}  // namespace

// The asynchronous writer (acl_save). Every call that can wait releases the
// GIL: the writer thread never takes it, but other Python threads should run.
void bind_writer(py::module_& m) {
  using writer::Writer;
  m.def(
      "writer_flush",
      [] {
        py::gil_scoped_release nogil;
        Writer::get().flush();
      },
      "Waits until every acl_save write submitted so far is on disk; raises IoError (an OSError) describing "
      "the writes that failed since the last flush.");
  m.def(
      "writer_shutdown",
      [] {
        py::gil_scoped_release nogil;
        return Writer::get().shutdown();
      },
      "Drains the writer and joins its thread (interpreter exit); returns the unreported error text.");
  m.def(
      "writer_set_budget", [](size_t bytes) { Writer::get().set_budget(bytes); }, py::arg("bytes"),
      "Sets the byte budget for acl_save data in flight; producers wait while it is full.");
  m.def("writer_reset_peak", [] { Writer::get().reset_peak(); });
  m.def(
      "writer_wait",
      [](int64_t seq) {
        py::gil_scoped_release nogil;
        Writer::get().wait_for(seq);
      },
      py::arg("seq"), "Waits until the job with this submission number has finished.");
  m.def(
      "writer_cancel",
      [](const std::string& prefix, int64_t after_seq) { return Writer::get().cancel(prefix, after_seq); },
      py::arg("prefix"), py::arg("after_seq"),
      "Drops queued file writes after job `after_seq` whose file starts with `prefix` (exit with a tensor-task "
      "step never finished); returns how many.");
  m.def(
      "writer_wait_errors",
      [](int64_t seq) {
        py::gil_scoped_release nogil;
        if (seq >= 0) Writer::get().wait_for(seq);
        return Writer::get().take_errors();
      },
      py::arg("seq"),
      "writer_wait(seq) (when seq >= 0), then writer_take_errors(), in one call: step() makes as few calls as "
      "it can (issue 39).");
  m.def(
      "_writer_test_hold",
      [] {
        TestHold& hold = test_hold();
        int64_t ticket = 0;
        {
          const std::lock_guard<std::mutex> lock(hold.mu);
          ticket = ++hold.holds;
        }
        writer::WriteJob job;
        job.file = "<test hold>";
        job.action = [&hold, ticket] {
          std::unique_lock<std::mutex> lock(hold.mu);
          hold.cv.wait_for(lock, std::chrono::minutes(2), [&hold, ticket] { return hold.released >= ticket; });
        };
        Writer& w = Writer::get();
        writer::Reservation r = w.reserve(0, writer::Producer::kHost, /*device_pending=*/false);
        return w.submit(std::move(r), std::move(job));
      },
      "Tests only: queues a job that holds the writer thread until _writer_test_release(); returns its number.");
  m.def(
      "_writer_test_release",
      [] {
        TestHold& hold = test_hold();
        {
          const std::lock_guard<std::mutex> lock(hold.mu);
          hold.released = hold.holds;
        }
        hold.cv.notify_all();
      },
      "Tests only: lets every job of _writer_test_hold() queued so far end.");
  m.def(
      "writer_take_errors", [] { return Writer::get().take_errors(); },
      "The failures since the last report (without waiting); an empty string when none.");
  m.def("writer_stats", [] {
    const writer::Counters s = Writer::get().counters();
    py::dict d;
    d["budget_bytes"] = s.budget_bytes;
    d["bytes_in_flight"] = s.bytes_in_flight;
    d["peak_bytes_in_flight"] = s.peak_bytes_in_flight;
    d["files_written"] = s.files_written;
    d["failed_writes"] = s.failed_writes;
    d["failed_records"] = s.failed_records;
    d["pending"] = s.pending;
    return d;
  });
  m.def(
      "cuda_devices_used",
      [] {
        py::list out;
        for (int d : devices_used()) out.append(d);
        return out;
      },
      "Indices of the CUDA devices graphprobe used (a record table or a save on them), ascending: the "
      "devices flush() synchronises.");
  m.def(
      "writable_dtype_names",
      [] {
        py::list out;
        // writer::writable_dtype is true exactly for the table's dtypes.
        for (const auto& d : pt::all_dtypes()) out.append(d.name);
        return out;
      },
      "The torch dtype names (without 'torch.') whose tensors acl_save and the tensor task write as files "
      "torch.load reads bit for bit.");
  m.attr("WRITER_DEFAULT_BUDGET") = writer::kDefaultBudgetBytes;
}

}  // namespace graphprobe::python
