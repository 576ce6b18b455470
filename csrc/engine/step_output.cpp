#include "engine/step_output.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/engine.h"
#include "format/dump_json.h"
#include "fs/atomic_file.h"
#include "writer/writer.h"

namespace graphprobe {
namespace {

constexpr const char* kTensorDir = "dump_tensor_data";

// Moves each row's staged file to "{call}.{io}.pt" and names it in the row.
// A row whose file is missing keeps no data_name: its staged write failed,
// and the writer has reported why; any other failure to move one (a name
// too long, a full directory, permissions) is reported through the writer
// here, with its errno, and counts the record as lost.
void file_tensors(std::vector<CallRecord>& calls, const std::string& staging, const std::string& data_dir) {
  for (CallRecord& c : calls) {
    for (TensorRow& r : c.tensors) {
      const std::string name = c.name + "." + io_name(r.place) + ".pt";
      const std::string from = Engine::staged_file(staging, r.slot);
      const std::string to = data_dir + "/" + name;
      if (::rename(from.c_str(), to.c_str()) == 0) {
        r.data_name = name;
        continue;
      }
      const int err = errno;
      if (err == ENOENT && ::access(from.c_str(), F_OK) != 0) continue;
      writer::Writer::get().record_error(
          to, "cannot move the staged tensor '" + from + "' there: " + std::strerror(err) + " (errno " +
                  std::to_string(err) + ")",
          /*records=*/1);
    }
  }
}

// Staged files of discarded steps and of records not in this step: none may
// be filed later by mistake. (Saves made after finish_step belong to the
// next step; they are queued behind this job and written after it.)
void clear_staging(const std::string& staging) {
  DIR* dir = ::opendir(staging.c_str());
  if (dir == nullptr) return;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind("slot", 0) == 0) (void)::unlink((staging + "/" + name).c_str());
  }
  ::closedir(dir);
}

// Deletes the staged files when the step's job ends, written or failed.
class StagingCleared {
 public:
  explicit StagingCleared(const std::optional<std::string>& staging) : staging_(staging) {}
  ~StagingCleared() {
    if (staging_) clear_staging(*staging_);
  }
  StagingCleared(const StagingCleared&) = delete;
  StagingCleared& operator=(const StagingCleared&) = delete;

 private:
  const std::optional<std::string>& staging_;
};

// The writer-thread half of a step. The writer starts it only after every
// job submitted before it (this step's staged tensors) and finishes it before
// any job submitted after it (the next step's staged tensors, which reuse the
// slot files), so the files it moves are this step's.
struct StepJob {
  std::optional<std::string> out_dir;  // nullopt: only clear the staging
  std::optional<std::string> staging;
  std::string task, level;
  StepRows collected;  // raw: converted here, off the caller's thread (step_rows.h)
  std::optional<std::vector<CallRecord>> calls;  // already named by step() (overwritten rows)

  void operator()() {
    const StagingCleared cleared(staging);
    if (!out_dir) return give_back_step_buffers(std::move(collected));
    if (!calls) calls = std::move(collected).name_calls();
    fs::make_dirs(*out_dir);
    std::string data_dir;
    if (staging) {
      data_dir = *out_dir + "/" + kTensorDir;
      fs::make_dirs(data_dir);
      file_tensors(*calls, *staging, data_dir);
    }
    fs::write_file_atomic(*out_dir + "/dump.json", build_dump_json(task, level, *calls, data_dir));
  }
};

// Host memory that calls named by step() hold until the writer has run the
// step's job, counted in the writer's budget (the text is built by the job).
size_t held_bytes(const std::vector<CallRecord>& calls) {
  size_t bytes = 0;
  for (const CallRecord& c : calls)
    bytes += sizeof(CallRecord) + c.name.size() + c.tensors.size() * (sizeof(TensorRow) + 32) +
             c.leaves.size() * (sizeof(Leaf) + 32);
  return bytes;
}

}  // namespace

StepReport finish_step_and_write(const std::optional<std::string>& out_dir, const std::string& task,
                                 const std::string& level, bool write_if_empty) {
  Engine& engine = Engine::get();
  const std::optional<std::string> staging = engine.tensor_staging();
  StepResult result = engine.finish_step(out_dir.has_value());
  StepReport report;
  report.dropped = result.dropped;
  report.records = result.step.records;
  const bool write = out_dir && !(result.step.records == 0 && !write_if_empty);
  if (!write && !staging) {
    give_back_step_buffers(std::move(result.step));
    return report;
  }
  StepJob step{write ? out_dir : std::nullopt, staging, task, level, std::move(result.step), std::nullopt};
  writer::WriteJob job;
  if (write) {
    // Replays that overwrote rows are warned about by this step(), with the
    // calls' names, so those calls are named here; otherwise the writer does.
    if (step.collected.overwritten) {
      step.calls = std::move(step.collected).name_calls();
      report.overwritten = summarize(*step.calls).overwritten;
    }
    job.file = *out_dir + "/dump.json";
    job.records = report.records;
  } else {
    job.file = *staging;
  }
  // The devices were synchronised by finish_step, so every captured save of
  // this step has reached the writer, ahead of this job.
  auto& w = writer::Writer::get();
  const size_t held = sizeof(StepJob) + step.collected.bytes() + (step.calls ? held_bytes(*step.calls) : 0);
  writer::Reservation r = w.reserve(held, writer::Producer::kHost, /*device_pending=*/false);
  job.action = std::move(step);
  report.write_seq = w.submit(std::move(r), std::move(job));
  report.written = write;
  return report;
}

}  // namespace graphprobe
