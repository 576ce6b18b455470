#pragma once
// One step's rows as the caller's thread hands them to the writer thread.
//
// step() must hold the training loop as little as it can (issue 39: <= 0.1
// ms on a small transformer). So the caller only copies the raw rows of the
// step (POD, one vector) with, per row, its slot's identity and a reference
// to its slot's description, plus references to the mirror table and a copy
// of the part of the call table the rows need; converting the rows (dtype
// names, shapes, mirrors: one allocation per row) and naming the calls run
// on the writer thread (StepRows::name_calls).
//
// Why the writer may read all of it while the caller's next forward records:
// the rows are copies; a SlotDesc and a MirrorMap are never changed once
// made (the engine replaces its pointer, under its lock, and the step keeps
// the old one alive); the call table is a copy whose layouts are immutable
// (call_registry.h). Nothing here points into the engine's mutable state.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/slot.h"
#include "identity/call_assembly.h"
#include "identity/call_registry.h"
#include "record/row.h"

namespace graphprobe {

// source probe key (site, index) -> the (site, index) pairs that mirror it
// (Engine::record_mirror). Copied on write.
using MirrorMap = std::unordered_map<uint64_t, std::vector<std::pair<int64_t, int64_t>>>;

// (site, index) as one hash key; a call never has 2^20 tensors.
constexpr int kProbeIndexBits = 20;
inline uint64_t probe_key(int64_t site, int64_t index) {
  return (static_cast<uint64_t>(site) << kProbeIndexBits) | static_cast<uint64_t>(index);
}

// One row written in the step, as the record table held it.
struct StepRow {
  Row row;
  int64_t slot = -1;
  int64_t site = -1;
  int64_t index = 0;
  int64_t instance = 0;
  bool captured = false;
  double device_order = 0;  // devices are ordered by (type, index)
  std::shared_ptr<const SlotDesc> desc;
};

struct StepRows {
  std::vector<StepRow> rows;  // in table order, then row order, as finish_step found them
  std::shared_ptr<const MirrorMap> mirrors;
  bool md5_requested = false;  // summary_mode "md5" when the step ended
  CallTable table;             // as it stood when the step ended
  int64_t records = 0;         // tensor rows, each mirror counted
  bool overwritten = false;    // a row was written more than once (several replays per step)

  // Host memory held until the writer has named the calls (the rows, and
  // their converted form while the writer converts them).
  size_t bytes() const;
  // The rows as ExecutedRows (each again under every probe that mirrors it,
  // right after it): what assemble_calls reads with `table`. Same rows, same
  // order as the engine converted them on the caller's thread before.
  std::vector<ExecutedRow> executed_rows() const;
  // The step's calls in program order (assemble_calls); then the buffers go
  // back to the pool below.
  std::vector<CallRecord> name_calls() &&;
};

// Buffers of steps whose calls were named, for finish_step to fill again:
// after a forward, the caller's first large allocation pays for glibc's
// consolidation of what the forward freed (tens of microseconds on a small
// transformer), so step() reuses the memory of earlier steps instead (issue
// 39). A few are kept (the writer may hold several steps); the rest are
// freed. Thread-safe: given back on the writer thread, taken on the caller's.
StepRows take_step_buffers();
void give_back_step_buffers(StepRows&& used);

}  // namespace graphprobe
