#pragma once
// The record store behind every probe op: slots, tables and the step protocol.
//
// A slot is one probe execution site: (entry, place) plus, outside graph
// capture, the how-many-th execution of that site in the current step. Inside
// capture every execution is a new slot, because the captured kernels of that
// execution write its row on every replay. Rows carry the epoch of their last
// write; finish_step() keeps only rows written in the current epoch, in
// execution order, and starts a new epoch.

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
#include "engine/row.h"
#include "format/dump_json.h"

namespace graphprobe {

struct ProbeSite {
  const std::string& entry;
  const std::string& place;
  const std::string& extras;
  bool requires_grad;
};

struct StepResult {
  std::vector<TensorRow> rows;  // execution order
  int64_t dropped = 0;          // records refused since the last step (slot limit)
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

  // Records x's statistics (and, in the tensor task, stages x itself for
  // step() to file under its record name).
  void record(const at::Tensor& x, const ProbeSite& site);

  // The tensor task: every recorded tensor is also saved to
  // `dir/slot{S}.pt` (overwritten by each execution, latest wins, like the
  // statistics); step() moves the files of this step's records to their
  // final names. nullopt: statistics only.
  void set_tensor_staging(std::optional<std::string> dir);
  std::optional<std::string> tensor_staging();
  static std::string staged_file(const std::string& dir, int64_t slot);

  // Collects (when `collect`) the rows written in this epoch, then begins the
  // next epoch. Synchronises each device once.
  StepResult finish_step(bool collect);

  // Forgets all slots (stop()). Device rows are retired, never reused: a graph
  // captured while wired may still replay and write them.
  void reset();

  // Probes record only while active (between start() and stop()). Graphs
  // captured while active keep their kernels and still write their rows.
  void set_active(bool active);

  // The live switch (dump_enable): while off, no probe writes a row, captured
  // kernels included (they read the switch from device memory), and slots are
  // not consumed. Must not be flipped while a stream is capturing.
  void set_enabled(bool enabled);

 private:
  struct Slot {
    std::string entry, place, extras;
    bool requires_grad = false;
    c10::Device device{c10::kCPU};
    int64_t row = -1;
    c10::ScalarType dtype = c10::ScalarType::Float;
    std::vector<int64_t> shape;
    int64_t numel = 0;
  };

  void update_recording_locked() { gates_.back()->store(active_ && enabled_); }

  int64_t slot_for(const at::Tensor& x, const ProbeSite& site, bool capturing);
  static void refresh(Slot& s, const at::Tensor& x, const ProbeSite& site);
  int64_t new_slot(const at::Tensor& x, const ProbeSite& site);
  DeviceTable& cuda_table(int index);
  void append_rows(std::vector<std::pair<std::pair<double, double>, TensorRow>>& out, const std::vector<Row>& rows,
                   const std::vector<int64_t>& row_slot, double device_order);

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
  int64_t dropped_ = 0;
  int64_t epoch_ = 1;  // 0 marks a row never written
  std::vector<Slot> slots_;
  std::unordered_map<std::string, std::vector<int64_t>> eager_slots_;  // site key -> slot per occurrence
  std::unordered_map<std::string, int64_t> eager_seen_;                // site key -> occurrences this epoch
  std::deque<Row> cpu_rows_;  // deque: rows keep their address as it grows
  std::vector<int64_t> cpu_row_slot_;
  double cpu_seq_ = 0;
  std::map<int, std::unique_ptr<DeviceTable>> cuda_tables_;
  std::map<int, std::vector<int64_t>> cuda_row_slot_;
};

std::string dtype_name(c10::ScalarType t);

}  // namespace graphprobe
