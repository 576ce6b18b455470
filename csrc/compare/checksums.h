#pragma once
// The checksum compare ("md5" keys, docs/formats.md "Checksums") inside the
// engine's one read of each dump.json. Torch-free.
//
// While the reader walks `data` entry by entry, a ChecksumCollector looks at
// the same parsed entry: until a tensor record with "md5" shows up it only
// walks the tree (no allocation), so a dump without checksums pays nothing
// but that walk. Once one does, every tensor record is kept with its
// checksum, dtype and shape, named as the checksum compare has always named
// them (graphprobe/compare/checksums.py, before this moved here): every
// object holding "dtype" and "shape" is a tensor record; the parts of an
// entry go input_args, input_kwargs/input, parameters, output, then any
// other key in file order; input_args and input_kwargs are both "input";
// list positions and dict keys are appended with dots, inside a
// parameters_grad entry too (so these names can differ from the compare
// rows', which drop a parameters_grad entry's list positions).
//
// The comparison pairs each target record with the bench's first record of
// the same name: bit-identical when checksum, dtype and shape are equal,
// bit-different otherwise, "no checksum" where a side's md5 is null or not
// text, unpaired without a partner; rows in target order (a name repeated on
// the target side is listed once), then the bench's records without a
// partner in bench order.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compare/rare_string.h"
#include "format/json_reader.h"

namespace graphprobe::compare {

struct ChecksumRecord {
  std::string name;  // "{entry}.input.0"
  uint32_t entry = 0;  // index into ChecksumRecords::entries
  uint32_t dtype = 0;  // index into ChecksumRecords::dtypes; kNoDtype when "dtype" is not text
  // md5: kNone for null, a missing key or a value that is not text; kHex for
  // up to 16 lowercase hex digits, held in md5_bits (md5_len digits); kText
  // for any other text, held in md5_text.
  enum class Md5 : uint8_t { kNone, kHex, kText };
  Md5 md5 = Md5::kNone;
  uint8_t md5_len = 0;
  // shape: kNone when not a list; kInts for a list of integers (in shape);
  // kOther for any other list, held as Python's repr in shape_text.
  enum class Shape : uint8_t { kNone, kInts, kOther };
  Shape shape_kind = Shape::kNone;
  uint64_t md5_bits = 0;
  RareString md5_text;
  RareString shape_text;
  std::vector<int64_t> shape;

  static constexpr uint32_t kNoDtype = UINT32_MAX;
};

struct ChecksumRecords {
  // A tensor record holds the key "md5" (null counts: the dump was written
  // with checksums on).
  bool carried = false;
  // The lengths (in characters) of the md5 texts: 16 for graphprobe's
  // checksum, 8 for msprobe's CRC-32. Sorted, unique.
  std::vector<size_t> digits;
  std::vector<std::string> entries;  // entry names, in the order Python's json.load gives them
  std::vector<std::string> dtypes;   // distinct dtype texts
  std::vector<ChecksumRecord> records;
  // The first "md5" came after tensor records without one: the reader reads
  // the dump again to keep them (ChecksumCollector(true)).
  bool needs_second_read = false;
};

class ChecksumCollector {
 public:
  // collect_all: keep every tensor record from the first entry on (the
  // second read of a dump whose first "md5" came after records without one).
  explicit ChecksumCollector(bool collect_all = false) : collect_all_(collect_all), collecting_(collect_all) {}

  // One entry of `data`, at position `raw_index` of the reader's entry list
  // (duplicates of an entry name included).
  void entry(uint32_t raw_index, const std::string& name, const json::Value& v);
  // "data" appeared again: forget what was seen.
  void clear();
  // True when "md5" first appeared after tensor records without it: those
  // are gone, so the dump must be read again with collect_all.
  bool needs_second_read() const { return late_; }
  // The records, duplicate entries resolved as Python's json.load does (the
  // last one's records, at the place of the first). raw_entries: the
  // reader's entry list, before its own duplicate resolution.
  ChecksumRecords finish(const std::vector<std::string>& raw_entries);

 private:
  void walk(const json::Value& v, std::string& name);
  void tensor(const json::Value& v, const std::string& name);

  bool collect_all_;
  bool collecting_;
  bool found_ = false;  // looking only: the entry being looked at holds "md5"
  bool late_ = false;
  size_t tensors_seen_ = 0;
  uint32_t raw_entry_ = 0;
  ChecksumRecords out_;
};

enum class ChecksumResult : uint8_t { kIdentical, kDifferent, kNoChecksum, kUnpaired };
const char* checksum_result_name(ChecksumResult r);  // "bit-identical", "bit-different", "no checksum", "unpaired"

struct ChecksumRow {
  int64_t target = -1;  // index into the target's records, -1 when absent
  int64_t bench = -1;
  ChecksumResult result = ChecksumResult::kUnpaired;
};

struct ChecksumComparison {
  std::vector<ChecksumRow> rows;
  std::array<int64_t, 4> counts{};        // per ChecksumResult
  std::optional<size_t> first_different;  // index into rows
};

// Pairs and judges the records of both sides (call only when both carry
// checksums; the caller checks that their digits agree).
ChecksumComparison compare_checksums(const ChecksumRecords& target, const ChecksumRecords& bench);

// The md5 text of a record (empty for kNone).
std::string md5_text(const ChecksumRecord& r);
// The shape as Python prints the list ("[2, 8]"); empty for kNone.
std::string shape_repr(const ChecksumRecord& r);

// checksum_result_*.csv: Name, NPU md5, Bench md5, NPU Dtype, Bench Dtype,
// NPU Tensor Shape, Bench Tensor Shape, Result; quoted and ended (\r\n) as
// Python's csv module writes them. Written atomically, in pieces.
void write_checksum_csv(const ChecksumRecords& target, const ChecksumRecords& bench, const ChecksumComparison& c,
                        const std::string& path);
std::string render_checksum_csv(const ChecksumRecords& target, const ChecksumRecords& bench,
                                const ChecksumComparison& c);

}  // namespace graphprobe::compare
