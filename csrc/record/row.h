#pragma once
// One row of a record table: what a probe writes each time it executes.
//
// Every column is a double so that a row is one contiguous block a device
// kernel can fill and a single copy can bring back. Bookkeeping columns
// (stamp, sequence, write count) are integers well below 2^53, so they stay
// exact. The one exception is column::kChecksum, 64 raw bits.

#include <cstdint>
#include <cstring>

namespace graphprobe {

// The columns of a row, as row.v[column::kMax]: qualified at every use, so
// that they read apart from dump.json's key names (dump_keys::kMax).
namespace column {
enum Column : int {
  kMax = 0,
  kMin,
  kSum,
  kSumSq,
  kNanCount,
  kStamp,    // epoch in which the row was last written; 0 = never
  kSeq,      // execution order among the rows of one device
  kWrites,   // writes since the epoch began (>1: several replays per step)
  // summary_mode "md5" (stats/checksum.h): the tensor's 64-bit checksum,
  // stored as its bits in this double's 8 bytes (not a number: read it with
  // row_checksum), valid when kHashed is 1 (this write computed it).
  kChecksum,
  kHashed,
  // The Sketch statistic (stats/sketch.h): four signed sums; NaN where the
  // writer did not compute them (non-floating tensors, precomputed
  // statistics without them), and then left out of dump.json.
  kSketch0,
  kSketch1,
  kSketch2,
  kSketch3,
  kNumColumns
};
}  // namespace column

struct Row {
  double v[column::kNumColumns];
};

// The checksum bits of column::kChecksum (meaningful when column::kHashed is 1).
inline uint64_t row_checksum(const Row& r) {
  uint64_t bits = 0;
  std::memcpy(&bits, &r.v[column::kChecksum], sizeof(bits));
  return bits;
}

inline void set_row_checksum(Row& r, uint64_t bits) { std::memcpy(&r.v[column::kChecksum], &bits, sizeof(bits)); }

}  // namespace graphprobe
