#pragma once
// Builds msprobe's dump.json from the rows of one step. Torch-free.
//
// Rows arrive in execution order. Each row is one tensor of one call: its
// entry template ("Module.fc.Linear.forward.{n}"), its place in the call
// ("input_args.0", "input_kwargs.mask", "output.0.1") and its statistics.
// A row opens a new call of its entry when its place was already seen in the
// entry's open call, or when it is an input and the open call already has an
// output; otherwise it joins the open call. So calls of one entry with
// different numbers of tensors (an optional mask, `x + 1` then `x + y`) stay
// apart, and call indices follow real execution order. (A module that calls
// itself recursively would have its calls merged.)

#include <cstdint>
#include <string>
#include <vector>

namespace graphprobe {

enum class ValueKind : int { kFloating = 0, kIntegral = 1, kBoolean = 2, kNoStats = 3 };

struct TensorRow {
  std::string entry;   // name template; "{n}" is replaced by the call index
  std::string place;   // dotted path inside the call
  std::string extras;  // non-tensor leaves of the same part, see parse_extras
  std::string dtype;   // "torch.float32"
  std::vector<int64_t> shape;
  bool requires_grad = false;
  ValueKind kind = ValueKind::kFloating;
  int64_t numel = 0;
  double max = 0, min = 0, sum = 0, sumsq = 0;
  int64_t nan_count = 0;
  int64_t writes = 1;  // executions since the last step (>1: replays collapsed)
  std::string data_name;  // tensor task: file holding the full tensor
  int64_t slot = -1;      // the engine slot that wrote the row
};

struct DumpSummary {
  int64_t entries = 0;
  int64_t tensors = 0;
  // Names of entries one of whose rows was written more than once since the
  // last step: several replays happened and only the latest values are kept.
  std::vector<std::string> overwritten;
};

// Returns the whole document. `level`, `task` and `dump_data_dir` (the
// tensor files' folder; null when empty) are copied to the header.
std::string build_dump_json(const std::string& task, const std::string& level, const std::vector<TensorRow>& rows,
                            DumpSummary* summary, const std::string& dump_data_dir = "");

// Which call each row belongs to (the rule above), and each call's name.
struct CallGrouping {
  std::vector<size_t> row_call;    // per row: index into names
  std::vector<std::string> names;  // "Module.fc.Linear.forward.0", in order of first row
};
CallGrouping group_calls(const std::vector<TensorRow>& rows);

// The compare row suffix of a place: "input_args.0" and "input_kwargs.mask"
// -> "input.0", "input.mask"; "output.0.1" stays. A tensor's file in the
// tensor task is "{call name}.{io_name}.pt", as msprobe names them.
std::string io_name(const std::string& place);

// The entry name of call `n`: "{n}" replaced (the only placeholder).
std::string entry_name(const std::string& entry_template, int64_t n);

}  // namespace graphprobe
