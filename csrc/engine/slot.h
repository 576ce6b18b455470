#pragma once
// A slot: one probe execution (engine.h says which executions share one),
// its row in its device's record table and the tensor it last recorded.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

namespace graphprobe {

struct Slot {
  int64_t site = -1;
  int64_t index = 0;
  bool captured = false;
  int64_t instance = 0;  // which execution of (site, index): in this step, or which capture
  c10::Device device{c10::kCPU};
  int64_t row = -1;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;
  int64_t numel = 0;
};

}  // namespace graphprobe
