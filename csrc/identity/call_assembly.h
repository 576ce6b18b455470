#pragma once
// Rebuilds the calls of one step from the rows its probes wrote. Torch-free.
//
// Every row names its site and tensor index (call_registry.h) and which
// execution of that probe it holds: `instance` counts the executions of the
// probe in this step (a compiled model run twice per step writes instances 0
// and 1), or, for rows written by a captured graph, the capture the probe was
// recorded in. Rows with the same call and instance form one call.
//
// Order is program order, computed without trusting the order in which a
// backend ran the probes: rows of static sites are grouped by run (their
// program and instance); a run is placed by the first row any of its probes
// wrote (runs of different graphs do not interleave), and inside a run the
// calls keep their insertion positions. An eager part is its own run. A call
// starts at its input part and ends at its output part; calls of an entry are
// numbered by start ({n}, as msprobe numbers them when they begin) and listed
// by end (children before parents, as forward hooks see them).

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "record/call_record.h"
#include "identity/call_registry.h"

namespace graphprobe {

// One probe execution's row as the engine collects it at step(): which
// probe wrote it (site, index, and which execution) and the tensor's record.
struct ExecutedRow {
  int64_t site = -1;
  int64_t index = 0;
  bool captured = false;
  int64_t instance = 0;
  // When the row was last written: (device order, sequence on that device).
  std::pair<double, double> when{0, 0};
  TensorRow row;  // statistics, dtype, shape; place, order and requires_grad come from the site
};

// Rows whose site the table does not hold (or does not describe) are left out.
std::vector<CallRecord> assemble_calls(const CallTable& registry, std::vector<ExecutedRow> rows);

}  // namespace graphprobe
