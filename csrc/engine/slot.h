#pragma once
// A slot: one probe execution (engine.h says which executions share one),
// its row in its device's record table and the tensor it last recorded.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace graphprobe {

// The tensor a slot's latest execution recorded. Never changed once made: an
// execution with another dtype or shape gives the slot a new one
// (Engine::refresh), so that a step handed to the writer thread
// (engine/step_rows.h) keeps describing its own rows while the caller's next
// forward already records into the same slots. Shared, so handing a step over
// costs a reference count per row, not a copy of its shape.
struct SlotDesc {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;
  int64_t numel = 0;
};

struct Slot {
  int64_t site = -1;
  int64_t index = 0;
  bool captured = false;
  int64_t instance = 0;  // which execution of (site, index): in this step, or which capture
  c10::Device device{c10::kCPU};
  int64_t row = -1;
  std::shared_ptr<const SlotDesc> desc;  // never null once the slot is made
};

}  // namespace graphprobe
