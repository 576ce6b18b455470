#include <pybind11/stl.h>

#include "engine/engine.h"
#include "format/dump_json.h"
#include "fs/atomic_file.h"
#include "python/bindings.h"
#include "writer/writer.h"

namespace py = pybind11;

namespace graphprobe::python {

void bind_engine(py::module_& m) {
  m.def(
      "finish_step",
      [](std::optional<std::string> out_dir, const std::string& task, const std::string& level,
         bool write_if_empty) {
        StepResult result;
        {
          py::gil_scoped_release nogil;  // device synchronisation can take a while
          result = Engine::get().finish_step(out_dir.has_value());
        }
        py::dict summary;
        summary["dropped"] = result.dropped;
        summary["written"] = false;
        if (!out_dir || (result.rows.empty() && !write_if_empty)) return summary;
        DumpSummary ds;
        std::string text = build_dump_json(task, level, result.rows, &ds);
        // The document goes to the writer thread: the caller's thread does not
        // wait for the disk (fsync costs milliseconds). A failure to create
        // the folder is reported here, in the summary; a failed write later,
        // by the writer (writer_take_errors), with the records it held.
        std::string error;
        int64_t seq = -1;
        {
          py::gil_scoped_release nogil;
          try {
            fs::make_dirs(*out_dir);
            auto& w = writer::Writer::get();
            writer::Reservation r = w.reserve(text.size(), writer::Producer::kHost, /*device_pending=*/false);
            writer::WriteJob job;
            job.file = *out_dir + "/dump.json";
            job.is_document = true;
            job.records = ds.tensors;
            job.text = std::move(text);
            seq = w.submit(std::move(r), std::move(job));
          } catch (const fs::IoError& e) {
            error = e.what();
          }
        }
        if (!error.empty()) summary["error"] = error;
        summary["write_seq"] = seq;
        summary["written"] = error.empty();
        summary["entries"] = ds.entries;
        summary["tensors"] = ds.tensors;
        summary["overwritten"] = ds.overwritten;
        return summary;
      },
      py::arg("out_dir"), py::arg("task"), py::arg("level"), py::arg("write_if_empty") = true,
      "Ends the current step: writes out_dir/dump.json (unless out_dir is None, or nothing was recorded and "
      "write_if_empty is false) from the rows written in it, then starts the next one.");
  m.def("set_active", [](bool active) { Engine::get().set_active(active); });
  m.def("set_enabled", [](bool enabled) { Engine::get().set_enabled(enabled); });
  m.def("enabled", [] { return Engine::get().enabled(); });
  m.def("reset", [] { Engine::get().reset(); });
  m.def("slot_count", [] { return Engine::get().slot_count(); });
}

}  // namespace graphprobe::python
