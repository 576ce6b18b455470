#pragma once
// What step() leaves on disk: dump.json and, in the tensor task, this step's
// tensor files moved from staging to their record names under
// dump_tensor_data/. The caller's thread only collects the rows (one copy
// per device); naming the calls, the folders, the tensor files, the JSON
// text and the write are one job of the writer thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace graphprobe {

struct StepReport {
  int64_t dropped = 0;          // records refused since the last step (slot limit)
  bool written = false;         // dump.json handed to the writer
  int64_t write_seq = -1;       // the step's writer job, to wait for (-1: none)
  int64_t records = 0;          // tensor rows written in this step
  std::vector<std::string> overwritten;  // entries written more than once since the last step
};

// Ends the current step (Engine::finish_step). With `out_dir`, has the
// writer thread write out_dir/dump.json unless nothing was recorded and
// !write_if_empty; a folder that cannot be made, a tensor file that cannot
// be moved and a failed write are kept by the writer for its next report,
// with the records lost. After the job, no staged tensor file of this step
// (or an earlier one) is left to be filed later by mistake.
StepReport finish_step_and_write(const std::optional<std::string>& out_dir, const std::string& task,
                                 const std::string& level, bool write_if_empty);

}  // namespace graphprobe
