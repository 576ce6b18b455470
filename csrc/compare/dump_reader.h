#pragma once
// dump.json -> one flat record per tensor, in execution order. Torch-free.
//
// Entries are taken in the order of `data` (the dumper writes calls as they
// complete). Inside an entry: input_args (or a backward entry's `input`),
// then input_kwargs, then output. Row names follow msprobe's compare:
//   {entry}.input.{i}   {entry}.input.{kwarg}   {entry}.output.{i}
// with `.{j}` / `.{key}` appended per level of nesting. Positions are kept
// across non-tensor values, so `input.2` is the third argument whatever
// the first two were. Non-tensor records ({"type": "int", "value": 3}) and
// null placeholders produce no row.

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "compare/opt_double.h"

namespace graphprobe::compare {

// A dump.json that cannot be read as one. The message names the file and
// the place: a line:column for malformed JSON, otherwise a JSON path such as
// data["Module.fc.Linear.forward.0"].output[0].Max.
class DumpFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Role : uint8_t { kInput, kOutput };

// Statistic order used everywhere: the CSV columns list them this way.
enum Stat : int { kMax = 0, kMin = 1, kMean = 2, kNorm = 3 };
constexpr int kNumStats = 4;
using StatArray = std::array<OptDouble, kNumStats>;

struct TensorRecord {
  std::string name;    // "{entry}.output.0"
  uint32_t entry = 0;  // index into Dump::entries
  Role role = Role::kInput;
  std::string dtype;
  std::vector<int64_t> shape;
  std::optional<bool> requires_grad;
  StatArray stats;  // absent: null or missing in the file (empty/bool tensors)
  // Tensor dumps only: the file under dump_tensor_data/ holding the tensor
  // ("{row name}.pt"); empty when the record has no "data_name".
  std::string data_name;

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
  // What reading decided that the user should hear about (duplicate keys).
  std::vector<std::string> notes;
};

// "data" is read entry by entry (json::ObjectStream): memory holds the
// records, not the document's tree. A key repeated in one object keeps its
// last value at the place of the first, as Python's json.load (and so
// msprobe) reads it, and adds a note naming the key and its line.
Dump parse_dump(std::string_view text, const std::string& source);
// Throws fs::IoError when the file cannot be read.
Dump read_dump(const std::string& path);

// "1.5" -> "1.5", used in messages; shortest round-trip, nan/inf lower-case.
std::string format_number(double v);

// [2, 8, 64], as msprobe writes shapes in its CSV and messages.
std::string shape_str(const std::vector<int64_t>& s);

}  // namespace graphprobe::compare
