#pragma once
// One step's rows as the devices wrote them, with what naming them needs.
//
// step() collects them on the caller's thread: one copy per device, each
// row's slot (which probe wrote it, the tensor's type and shape) and a copy
// of the part of the call table these rows need, which costs a reference
// count per site (CallRegistry::snapshot). Turning them
// into named, ordered calls (name_calls) is most of a step's host work and
// runs on the writer thread, off the training loop.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "record/row.h"
#include "engine/slot.h"
#include "record/call_record.h"
#include "identity/call_registry.h"

namespace graphprobe {

// A row written in the step, and (a copy of) the slot that wrote it.
struct WrittenRow {
  Row row;
  double device_order = 0;  // devices in table order (CPU first)
  int64_t slot_id = -1;
  Slot slot;
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
