#include "engine/step_output.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "engine/engine.h"
#include "format/dump_json.h"
#include "fs/atomic_file.h"
#include "writer/writer.h"

namespace graphprobe {
namespace {

constexpr const char* kTensorDir = "dump_tensor_data";

// Moves each row's staged file to "{call}.{io}.pt" and names it in the row.
// Returns how many rows had no staged file (its write failed; the writer
// reports why).
int64_t file_tensors(std::vector<CallRecord>& calls, const std::string& staging, const std::string& data_dir) {
  int64_t missing = 0;
  for (CallRecord& c : calls) {
    for (TensorRow& r : c.tensors) {
      const std::string name = c.name + "." + io_name(r.place) + ".pt";
      const std::string from = Engine::staged_file(staging, r.slot);
      if (::rename(from.c_str(), (data_dir + "/" + name).c_str()) == 0) {
        r.data_name = name;
      } else {
        ++missing;
      }
    }
  }
  return missing;
}

// Staged files of discarded steps, of records not in this step, and of
// replays after the last collected one: none may be filed later by mistake.
void clear_staging(const std::string& staging) {
  DIR* dir = ::opendir(staging.c_str());
  if (dir == nullptr) return;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind("slot", 0) == 0) (void)::unlink((staging + "/" + name).c_str());
  }
  ::closedir(dir);
}

}  // namespace

StepReport finish_step_and_write(const std::optional<std::string>& out_dir, const std::string& task,
                                 const std::string& level, bool write_if_empty) {
  Engine& engine = Engine::get();
  const std::optional<std::string> staging = engine.tensor_staging();
  StepResult result = engine.finish_step(out_dir.has_value());
  StepReport report;
  report.dropped = result.dropped;
  // The devices were synchronised by finish_step, so every captured save of
  // this step has reached the writer; wait until the staged files are on disk.
  if (staging) writer::Writer::get().drain();
  const bool write = out_dir && !(result.calls.empty() && !write_if_empty);
  if (write) {
    std::string data_dir;
    try {
      fs::make_dirs(*out_dir);
      if (staging) {
        data_dir = *out_dir + "/" + kTensorDir;
        fs::make_dirs(data_dir);
        report.missing_tensors = file_tensors(result.calls, *staging, data_dir);
      }
    } catch (const fs::IoError& e) {
      report.error = e.what();
    }
    DumpSummary ds;
    std::string text = build_dump_json(task, level, result.calls, &ds, data_dir);
    report.entries = ds.entries;
    report.tensors = ds.tensors;
    report.overwritten = std::move(ds.overwritten);
    if (report.error.empty()) {
      // The document goes to the writer thread: the caller does not wait for
      // the disk (an fsync costs milliseconds). A failed write is reported by
      // the writer later, with the records it held.
      auto& w = writer::Writer::get();
      writer::Reservation r = w.reserve(text.size(), writer::Producer::kHost, /*device_pending=*/false);
      writer::WriteJob job;
      job.file = *out_dir + "/dump.json";
      job.is_document = true;
      job.records = ds.tensors;
      job.text = std::move(text);
      report.write_seq = w.submit(std::move(r), std::move(job));
      report.written = true;
    }
  }
  if (staging) clear_staging(*staging);
  return report;
}

}  // namespace graphprobe
