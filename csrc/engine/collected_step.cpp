#include "engine/collected_step.h"

#include <utility>

#include "engine/engine.h"
#include "identity/call_assembly.h"
#include "record/dtype_name.h"
#include "stats/reducible_types.h"

namespace graphprobe {

bool CollectedStep::overwritten() const {
  for (const WrittenRow& w : rows)
    if (w.row.v[column::kWrites] > 1) return true;
  return false;
}

size_t CollectedStep::bytes() const {
  size_t n = sizeof(CollectedStep) + rows.capacity() * sizeof(WrittenRow);
  for (const WrittenRow& w : rows) n += w.slot.shape.capacity() * sizeof(int64_t);
  return n + table.copy_bytes();
}

std::vector<CallRecord> name_calls(CollectedStep step) {
  std::vector<ExecutedRow> executed;
  executed.reserve(step.rows.size());
  for (WrittenRow& w : step.rows) {
    const Row& r = w.row;
    Slot& s = w.slot;
    ExecutedRow& e = executed.emplace_back();
    e.site = s.site;
    e.index = s.index;
    e.captured = s.captured;
    e.instance = s.instance;
    // Devices are ordered by index, rows within a device by sequence number.
    e.when = {w.device_order, r.v[column::kSeq]};
    TensorRow& t = e.row;
    t.dtype = dtype_name(s.dtype);
    t.shape = std::move(s.shape);
    t.kind = stats::value_kind(s.dtype);
    t.numel = s.numel;
    t.max = r.v[column::kMax];
    t.min = r.v[column::kMin];
    t.sum = r.v[column::kSum];
    t.sumsq = r.v[column::kSumSq];
    t.nan_count = static_cast<int64_t>(r.v[column::kNanCount]);
    t.writes = static_cast<int64_t>(r.v[column::kWrites]);
    t.slot = w.slot_id;
  }
  return assemble_calls(step.table, std::move(executed));
}

}  // namespace graphprobe
