#pragma once
// One entry of a dump.json's "data" read straight from the text into
// TensorRecords. Torch-free.
//
// The tree reader (json::Value per entry, then a walk) allocates for every
// key and value before a single row exists; on graphprobe's and msprobe's
// dumps nearly every value is a tensor record of a few known keys, which
// this reader takes from the text as it goes. Whatever it does not know
// takes one of two ways back to the tree reader, so that rows, notes and
// messages stay exactly what the tree reader gives:
//   * a record with other keys or values (non-tensor values, P2POps,
//     records without "dtype"): that record alone is parsed as a tree and
//     walked by SubtreeRows;
//   * anything unusual for the entry as a whole (malformed or unloaded text,
//     a repeated key, unknown entry keys, deep nesting, checksums, a value
//     the walk rejects): read() gives up, leaves the dump as it was, and the
//     caller reads the entry as a tree, which reports what is wrong.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compare/dump_reader.h"
#include "format/json_reader.h"

namespace graphprobe::compare {

// The parts of a forward/backward entry, in the order their rows come:
// parameters before outputs, as msprobe orders them (reorder_index).
struct EntryPart {
  const char* key;
  const char* row;  // appended to the entry name
  Role role;
};
inline constexpr EntryPart kEntryParts[] = {{"input_args", ".input", Role::kInput},
                                            {"input_kwargs", ".input", Role::kInput},
                                            {"input", ".input", Role::kInput},
                                            {"parameters", ".parameters", Role::kInput},
                                            {"output", ".output", Role::kOutput}};

// The tree reader's walk of one value of an entry (a record the direct
// reader does not read itself), appending its rows. Throws DumpFormatError
// for a value it rejects.
class SubtreeRows {
 public:
  virtual void subtree(const json::Value& v, const std::string& name, uint32_t entry, Role role,
                       bool keep_positions) = 0;

 protected:
  ~SubtreeRows() = default;
};

// The checksum collector's view of a value (checksums.cpp: an object with
// "dtype" and "shape" is a tensor record, other objects and lists are
// looked into): whether a tensor record there holds "md5"; `tensor` is set
// when one is there at all.
bool holds_checksum(const json::Value& v, bool& tensor);

class DirectEntryReader {
 public:
  DirectEntryReader(Dump& dump, SubtreeRows& rest) : dump_(dump), rest_(rest) {}

  // Reads the value at text[offset] as the entry dump.entries.back(), nested
  // `depth` levels deep (json::ObjectStream::depth()), appending its rows.
  // parameters_grad: msprobe's structure of records without list positions.
  // Returns the offset just after the value, or npos with the dump as it
  // was when the entry needs the tree reader (see above).
  size_t read(std::string_view text, size_t offset, size_t depth, bool parameters_grad);
  // The last entry read holds an object with "dtype" and "shape" (a tensor
  // record as the checksum collector counts them), none with "md5".
  bool saw_tensor() const { return saw_tensor_; }

  static constexpr size_t npos = std::string_view::npos;

 private:
  bool entry(size_t depth);
  bool parameters_grad_entry(size_t depth);
  bool node(size_t depth);
  bool array(size_t depth);
  bool object(size_t depth);
  bool record();
  bool tree(size_t depth);

  // The text under the cursor.
  void ws();
  char peek() const { return p_ < end_ ? *p_ : '\0'; }
  bool consume(char c);
  bool literal(std::string_view lit);
  bool string(std::string_view& out);
  bool number(double& v, bool& integer);
  bool size(int64_t& v);

  Dump& dump_;
  SubtreeRows& rest_;
  const char* p_ = nullptr;
  const char* end_ = nullptr;
  uint32_t entry_ = 0;
  Role role_ = Role::kInput;
  bool keep_positions_ = true;
  bool saw_tensor_ = false;
  std::string name_;                     // the row name being built
  std::vector<int64_t> shape_;           // the record's shape, reused
  std::vector<std::string_view> keys_;   // the keys of the dicts being read, to see one repeated
  std::vector<json::DuplicateKey> dups_;  // of the values left to the tree
};

}  // namespace graphprobe::compare
