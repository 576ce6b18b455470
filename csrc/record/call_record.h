#pragma once
// The calls of one step as every layer sees them: named, numbered and
// ordered by csrc/identity, written by csrc/format (dump.json) and by the
// engine's step output (tensor files). Torch-free.
//
// Each call holds its tensors (a place inside the call, "input_args.0" as
// ["input_args", "0"], and the tensor's statistics) and its non-tensor leaves
// (ints, floats, strings, None, ... as msprobe writes them).

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "record/value_kind.h"

namespace graphprobe {

// A path inside a call: its first component is the part ("input_args",
// "input_kwargs", "output"), then list indices and dict keys. Kept as
// components so that a dict key holding a '.' stays one key.
using Place = std::vector<std::string>;

inline constexpr double kNoSketch = std::numeric_limits<double>::quiet_NaN();

struct TensorRow {
  Place place;
  int64_t order = 0;   // position among the call's values in argument order
  std::string dtype;   // "torch.float32"
  std::vector<int64_t> shape;
  bool requires_grad = false;
  ValueKind kind = ValueKind::kFloating;
  int64_t numel = 0;
  double max = 0, min = 0, sum = 0, sumsq = 0;
  int64_t nan_count = 0;
  // The Sketch statistic's four signed sums (stats/sketch.h); written as
  // "Sketch" when all four are finite, left out otherwise.
  std::array<double, 4> sketch{kNoSketch, kNoSketch, kNoSketch, kNoSketch};
  int64_t writes = 1;  // executions since the last step (>1: replays collapsed)
  // summary_mode "md5": the checksum of the tensor's bits (docs/formats.md),
  // written as "md5"; requested without a value (an empty tensor, a type or
  // device without a checksum kernel) it is written as null, as msprobe
  // writes an empty tensor's.
  bool md5_requested = false;
  std::optional<uint64_t> md5;
  std::string data_name;  // tensor task: file holding the full tensor
  // Extra fields after requires_grad, as (key, JSON text) pairs made by the
  // Python wiring (a DTensor's placements and global shape).
  std::vector<std::pair<std::string, std::string>> extras;
  int64_t slot = -1;      // the engine slot that wrote the row
};

// A non-tensor value of a call, written as {"type": ..., "value": ...}.
struct Leaf {
  enum class Kind : int { kNone, kBool, kInt, kFloat, kStr, kOpaque };
  Place place;
  int64_t order = 0;   // as TensorRow::order
  std::string type;  // Python type name: "int", "float", "str", "NoneType", "dtype", ...
  Kind kind = Kind::kOpaque;
  bool b = false;
  double f = 0;
  std::string text;  // kInt: the decimal digits (any size); kStr: the string
};

struct CallRecord {
  std::string name;  // "Module.fc.Linear.forward.0"
  std::vector<TensorRow> tensors;
  std::vector<Leaf> leaves;
};

struct DumpSummary {
  int64_t entries = 0;
  int64_t tensors = 0;
  // Names of entries one of whose rows was written more than once since the
  // last step: several replays happened and only the latest values are kept.
  std::vector<std::string> overwritten;
};

// Counts the entries and tensor records of `calls` and names the entries
// written more than once: what step() reports before dump.json is built.
DumpSummary summarize(const std::vector<CallRecord>& calls);

// The compare row suffix of a place: ["input_args", "0"] and
// ["input_kwargs", "mask"] -> "input.0", "input.mask"; ["output", "0", "1"]
// -> "output.0.1". A tensor's file in the tensor task is
// "{call name}.{io_name}.pt", as msprobe names them.
std::string io_name(const Place& place);

// The entry name of call `n`: "{n}" replaced (the only placeholder).
std::string entry_name(const std::string& entry_template, int64_t n);

}  // namespace graphprobe
