#pragma once
// What step() leaves on disk: dump.json (handed to the writer thread) and,
// in the tensor task, this step's tensor files moved from staging to their
// record names under dump_tensor_data/.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace graphprobe {

struct StepReport {
  int64_t dropped = 0;          // records refused since the last step (slot limit)
  bool written = false;         // dump.json handed to the writer
  int64_t write_seq = -1;       // its writer job, to wait for
  int64_t entries = 0;
  int64_t tensors = 0;
  int64_t missing_tensors = 0;  // tensor task: records that got no file (the writer reports why)
  std::vector<std::string> overwritten;  // entries written more than once since the last step
  std::string error;            // the step folder could not be made
};

// Ends the current step (Engine::finish_step). With `out_dir`, writes
// out_dir/dump.json unless nothing was recorded and !write_if_empty.
// Staged tensor files not used by this step are deleted.
StepReport finish_step_and_write(const std::optional<std::string>& out_dir, const std::string& task,
                                 const std::string& level, bool write_if_empty);

}  // namespace graphprobe
