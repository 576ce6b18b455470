#pragma once
// dump.json -> one flat record per tensor, in execution order. Torch-free.
//
// Entries are taken in the order of `data` (the dumper writes calls as they
// complete). Rows come as msprobe's compare makes them (read_op in
// msprobe/core/compare/utils.py):
//   * a forward/backward entry: input_args, input_kwargs and a backward
//     entry's `input` as {entry}.input.{i|kwarg}, then `parameters` as
//     {entry}.parameters.{name}, then `output` as {entry}.output.{i};
//     `.{j}` / `.{key}` appended per level of nesting;
//   * a parameters_grad entry ({module}.parameters_grad.{n}): every record
//     in it as {entry}.{name}; list positions are not appended.
// Every leaf is a row: tensors, non-tensor values ({"type": "int",
// "value": 3}: dtype "<class 'int'>", shape [], the four statistics the
// value) and null placeholders (dtype and shape N/A, statistics None). An
// empty list or object gives no row. See docs/formats.md.

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "compare/checksums.h"
#include "compare/record_arena.h"
#include "compare/opt_double.h"
#include "compare/rare_string.h"

namespace graphprobe::compare {

// A dump.json that cannot be read as one. The message names the file and
// the place: a line:column for malformed JSON, otherwise a JSON path such as
// data["Module.fc.Linear.forward.0"].output[0].Max.
class DumpFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Output rows are msprobe's "output"; everything else (arguments,
// parameters, parameter gradients) counts among the inputs.
enum class Role : uint8_t { kInput, kOutput };

// How a statistic was written. msprobe compares statistics as Python
// strings (1 and 1.0 differ, True is not a number), so the kind matters.
enum class ValueKind : uint8_t {
  kNone,   // null or missing: Python None
  kInt,    // an integer literal
  kFloat,  // any other number, NaN and infinities included
  kBool,
  kText,   // a string value (str arguments, "..." of an ellipsis, devices)
};

// Statistic order used everywhere: the CSV columns list them this way.
enum Stat : int { kStatMax = 0, kStatMin = 1, kStatMean = 2, kStatNorm = 3 };
constexpr int kNumStats = 4;
using StatArray = std::array<OptDouble, kNumStats>;

// |a - b|_2 of the two tensors whose Sketches these are (docs/formats.md,
// "Sketch": each projection's square is |x|^2 on average); not finite when a
// sum is not.
inline double sketch_distance(const std::array<double, 4>& a, const std::array<double, 4>& b) {
  double d2 = 0;
  for (int k = 0; k < 4; ++k) d2 += (a[k] - b[k]) * (a[k] - b[k]);
  return std::sqrt(d2 / 4);
}

struct TensorRecord {
  std::string_view name;  // "{entry}.output.0", held by its Dump's RecordArena
  uint32_t entry = 0;  // index into Dump::entries
  Role role = Role::kInput;
  bool is_tensor = true;  // a record with a "dtype" (tensors, numpy arrays)
  std::optional<bool> requires_grad;  // (the small fields side by side: no padding)
  std::array<ValueKind, kNumStats> kinds{};
  // graphprobe's "Sketch" (four signed sums, docs/formats.md): index into
  // Dump::sketches, -1 when the record has none (msprobe's dumps, older
  // graphprobe dumps, non-floating tensors). Here, in the small fields'
  // padding: a record is 160 bytes, not 168.
  int32_t sketch = -1;
  // "torch.float32"; "<class 'int'>" for non-tensor values; "N/A" for null
  // placeholders.
  std::string dtype;
  Shape shape;  // held by its Dump's RecordArena
  // Replaces shape in the CSV and in comparisons when set: "N/A" for null
  // placeholders, "(3,)" for slices.
  RareString shape_text;
  StatArray stats;  // numeric view; absent for None, bool and text values
  RareString text;  // the value of kText statistics (the four share it)
  // Tensor dumps only: the file under dump_tensor_data/ holding the tensor
  // ("{row name}.pt"); empty when the record has no "data_name".
  RareString data_name;

  // The part after the entry name: "output.0".
  std::string_view suffix(const std::vector<std::string>& entries) const {
    return std::string_view(name).substr(entries[entry].size() + 1);
  }
};

struct Dump {
  std::string source;                // file name used in messages
  std::string task;                  // top-level "task" ("statistics", "tensor"); empty if absent
  std::vector<std::string> entries;  // execution order
  std::vector<TensorRecord> rows;    // execution order
  // The rows' names and shapes (TensorRecord views them): shared, so that a
  // copy of the dump keeps them alive with its records.
  std::shared_ptr<RecordArena> arena = std::make_shared<RecordArena>();
  // The "Sketch" values of the rows that have one (TensorRecord::sketch):
  // kept beside the rows, so that dumps without them cost nothing.
  std::vector<std::array<double, 4>> sketches;
  // What reading decided that the user should hear about (duplicate keys).
  std::vector<std::string> notes;
  // Tensor records with their "md5", from the same read; empty unless the
  // dump carries checksums (checksums.h).
  ChecksumRecords checksums;
};

// "data" is read entry by entry (json::ObjectStream): memory holds the
// records, not the document's tree; common entries go straight from the
// text into records (direct_entry.h), the rest through a json::Value tree. A key repeated in one object keeps its
// last value at the place of the first, as Python's json.load (and so
// msprobe) reads it, and adds a note naming the key and its line.
Dump parse_dump(std::string_view text, const std::string& source);
// Throws fs::IoError when the file cannot be read.
Dump read_dump(const std::string& path);

}  // namespace graphprobe::compare
