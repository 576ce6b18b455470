#pragma once
// One row of a record table: what a probe writes each time it executes.
//
// Every column is a double so that a row is one contiguous block a device
// kernel can fill and a single copy can bring back. Bookkeeping columns
// (stamp, sequence, write count) are integers well below 2^53, so they stay
// exact.

#include <cstdint>

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
  kNumColumns
};
}  // namespace column

struct Row {
  double v[column::kNumColumns];
};

}  // namespace graphprobe
