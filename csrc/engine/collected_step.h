#pragma once
// One step's rows as the devices wrote them, with what naming them needs.
//
// step() collects them on the caller's thread: one copy per device, each
// row's slot (which probe wrote it, the tensor's type and shape) and a copy
// of the call table, which costs a reference count per site. Turning them
// into named, ordered calls (name_calls) is most of a step's host work and
// runs on the writer thread, off the training loop.

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/row.h"
#include "format/dump_json.h"
#include "identity/call_registry.h"

namespace graphprobe {

// A row written in the step, and the slot that wrote it.
struct WrittenRow {
  Row row;
  double device_order = 0;  // devices in table order (CPU first)
  int64_t slot = -1;
  int64_t site = -1;
  int64_t index = 0;
  bool captured = false;
  int64_t instance = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  int64_t numel = 0;
  std::vector<int64_t> shape;
};

struct CollectedStep {
  std::vector<WrittenRow> rows;
  CallTable table;  // as it stood when the step ended

  // Whether a row was written more than once since the last step (several
  // replays per step): step() then names the calls itself, to warn with
  // their names at once.
  bool overwritten() const;
  // Host memory held until the writer has named the calls.
  size_t bytes() const;
};

// The step's calls in program order (identity/call_assembly.h).
std::vector<CallRecord> name_calls(CollectedStep step);

}  // namespace graphprobe
