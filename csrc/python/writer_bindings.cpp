#include <pybind11/pybind11.h>

#include "format/pt_archive.h"
#include "python/bindings.h"
#include "runtime/devices_used.h"
#include "writer/writer.h"

namespace py = pybind11;

namespace graphprobe::python {

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
