#pragma once
// The record store behind every probe op: slots, tables and the step protocol.
//
// A probe carries a site and a tensor index (csrc/identity). A slot is one
// probe execution: outside graph capture the k-th execution of (site, index)
// in the current step reuses the k-th slot; inside capture every execution is
// a new slot, because the captured kernels of that execution write its row
// on every replay. Rows carry the epoch of their last write; finish_step()
// keeps only rows written in the current epoch and hands them, with a copy
// of the call table, to the writer thread (engine/step_rows.h), which
// converts them and has the call assembly name and order the calls.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/device_table.h"
#include "record/row.h"
#include "engine/slot.h"
#include "engine/step_rows.h"
#include "record/call_record.h"
#include "identity/call_assembly.h"
#include "identity/call_registry.h"

namespace graphprobe {

struct StepResult {
  StepRows step;        // empty unless collected
  int64_t dropped = 0;  // records refused since the last step (slot limit)
};

// More slots than this means step() is not being called; later records are
// dropped and counted rather than growing host memory without bound.
constexpr int64_t kMaxSlots = 1 << 22;

class Engine {
 public:
  // The probe ops are free functions called by the dispatcher, so the store
  // they write to is one per process; it is created on first use and never
  // destroyed, because CUDA graphs captured with probes may outlive any owner.
  static Engine& get();

  // Records x's statistics as tensor `index` of `site` (and, in the tensor
  // task, stages x itself for step() to file under its record name). A site
  // this engine does not know (wired by a dumper that was stopped) is ignored.
  void record(const at::Tensor& x, int64_t site, int64_t index);

  // Tensor `index` of `site` is, in the compiled graph that calls this, the
  // same value as tensor `source_index` of `source_site` (graphprobe::
  // record_mirror): from now on each row collected for the source is also
  // collected under (site, index), and x is not read. Kept until reset(),
  // because under CUDA graphs this host call runs while warming up and
  // capturing only, never on replay. In the tensor task x is recorded
  // itself: every record needs its own tensor file.
  void record_mirror(const at::Tensor& x, int64_t site, int64_t index, int64_t source_site, int64_t source_index);

  // Records statistics that compiled code computed itself, fused into the
  // kernels that produce the tensor (src/graphprobe/wiring/fused_stats.py):
  // `values` holds max, min, sum, sum of squares and NaN count as float64 on
  // the tensor's device; `dtype` and `shape` describe the tensor. Refused in
  // the tensor task, which needs the tensor itself.
  void record_values(const at::Tensor& values, int64_t site, int64_t index, c10::ScalarType dtype,
                     c10::IntArrayRef shape);

  // Registers one part of a call (call_registry.h) and returns its site.
  // Captured parts belong to the capture under way on the current stream.
  int64_t open_call(PartLayout layout, InsertMode mode, int64_t program);
  int64_t close_call(PartLayout layout, InsertMode mode, int64_t program);
  int64_t new_program();

  // The tensor task: every recorded tensor is also saved to
  // `dir/slot{S}.pt` (overwritten by each execution, latest wins, like the
  // statistics); step() moves the files of this step's records to their
  // final names. nullopt: statistics only.
  void set_tensor_staging(std::optional<std::string> dir);
  std::optional<std::string> tensor_staging();

  // summary_mode "md5": whether probes also hash their tensors' bits
  // (stats/checksum.h) and records carry the checksum (md5 in dump.json).
  void set_checksums(bool on);
  bool checksums();
  // statistics.sketch: whether probes compute the Sketch (stats/sketch.h).
  // Off saves the CPU kernel's second read; the CUDA kernel computes it in
  // its one pass either way.
  void set_sketches(bool on);
  static std::string staged_file(const std::string& dir, int64_t slot);

  // Collects (when `collect`) the rows written in this epoch, raw, then
  // begins the next epoch. Synchronises each device once; the rows are
  // converted and the calls named later, on the writer thread
  // (StepRows::name_calls).
  StepResult finish_step(bool collect);

  // The rows written in this epoch that finish_step() would collect, counted
  // without ending the step (stop() and exit warn about records that no
  // step() wrote). Synchronises each device once.
  int64_t pending_records();

  // Forgets all slots and sites (stop()). Device rows are retired, never
  // reused: a graph captured while wired may still replay and write them.
  void reset();

  // Probes record only while active (between start() and stop()). Graphs
  // captured while active keep their kernels and still write their rows.
  void set_active(bool active);

  // The live switch (dump_enable): while off, no probe writes a row, captured
  // kernels included (they read the switch from device memory), and slots are
  // not consumed. Must not be flipped while a stream is capturing.
  void set_enabled(bool enabled);

 private:
  void update_recording_locked() { gates_.back()->store(active_ && enabled_); }

  // Where one execution of a probe writes (on any device, CPU included);
  // table is null when the probe does not record (inactive, switched off,
  // unknown site, slot limit).
  struct DeviceTarget {
    DeviceTable* table = nullptr;
    int64_t row = -1;
    std::optional<std::string> staged;
    const std::atomic<bool>* gate = nullptr;
    bool checksum = false;
    bool sketch = true;
  };

  int64_t register_part(PartLayout layout, InsertMode mode, int64_t program, bool opening);
  bool admits_locked(int64_t site, int64_t index, bool capturing);
  DeviceTarget device_target(const at::Tensor& t, int64_t site, int64_t index, c10::ScalarType dtype,
                             c10::IntArrayRef shape, int64_t numel);
  int64_t slot_for(c10::Device device, int64_t site, int64_t index, bool capturing);
  static void refresh(Slot& s, c10::ScalarType dtype, c10::IntArrayRef shape, int64_t numel);
  // The mirrors of (site, index), or null.
  const std::vector<std::pair<int64_t, int64_t>>* mirrors_of(int64_t site, int64_t index) const;
  int64_t new_slot(c10::Device device, int64_t site, int64_t index, bool captured, int64_t instance);
  struct Table;
  Table& table(c10::Device device);
  // The rows of one device written in this epoch, raw, with their slots
  // (each mirror counted, not copied); with `out` null, only counted.
  int64_t append_rows(StepRows* out, const std::vector<Row>& rows, const std::vector<int64_t>& row_slot,
                      double device_order);

  std::mutex mu_;
  bool active_ = false;
  bool enabled_ = true;
  // active_ && enabled_, readable without the lock: captured saves check it
  // on every replay, from the CUDA driver's callback thread. One gate per
  // start/stop generation: reset() closes the current one for good, so a
  // graph captured under an earlier dumper never files tensors into a later
  // dumper's slots. Gates are never freed (captured graphs keep pointers).
  std::deque<std::unique_ptr<std::atomic<bool>>> gates_ = make_first_gate();
  static std::deque<std::unique_ptr<std::atomic<bool>>> make_first_gate() {
    std::deque<std::unique_ptr<std::atomic<bool>>> d;
    d.push_back(std::make_unique<std::atomic<bool>>(false));
    return d;
  }
  std::optional<std::string> staging_;
  bool checksums_ = false;
  bool sketches_ = true;
  int64_t dropped_ = 0;
  int64_t epoch_ = 1;  // 0 marks a row never written
  CallRegistry registry_;
  std::vector<Slot> slots_;
  // Probe key (site, index) -> its slot per execution in a step, and how many
  // executions this step has seen; captured executions counted since reset().
  std::unordered_map<uint64_t, std::vector<int64_t>> eager_slots_;
  std::unordered_map<uint64_t, int64_t> eager_seen_;
  std::unordered_map<uint64_t, int64_t> captured_seen_;
  // source probe key -> the (site, index) pairs that mirror it. Never changed
  // in place (record_mirror copies it): a step handed to the writer keeps
  // the map it was collected with. Never null.
  std::shared_ptr<const MirrorMap> mirrors_ = std::make_shared<const MirrorMap>();
  // One table per device, ordered by (type, index): CPU rows come first in a
  // step, then each accelerator's. row_slot: the slot of each row.
  struct Table {
    std::unique_ptr<DeviceTable> rows;
    std::vector<int64_t> row_slot;
  };
  std::map<std::pair<int, int>, Table> tables_;
  // finish_step's scratch, kept between steps so that step() allocates
  // nothing large on the caller's thread (DeviceTable::fetch_into).
  std::vector<Row> fetched_;
  std::vector<int64_t> step_sites_;
};

}  // namespace graphprobe
