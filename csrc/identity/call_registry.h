#pragma once
// Record identity, fixed when probes are inserted. Torch-free.
//
// A hook that inserts probes describes one part of one call: its inputs when
// the call opens (a forward pre-hook, an API call about to run), its outputs
// when it closes. Each part becomes a *site*; every probe of the part carries
// the site id and the tensor's index in the part, nothing else.
//
// While dynamo traces or a CUDA graph is captured, a call is *static*: it is
// created once, belongs to the program being traced or captured, and keeps
// its insertion position. The compiled or captured code then runs its probes
// with the same ids on every execution, in whatever order the backend
// schedules them, and the dump is rebuilt from the ids (call_assembly.h),
// never from that order. In eager mode the j-th call of an entry in a step
// reuses the j-th eager call of that entry, so ids stay bounded.
//
// A part's close pairs with the latest open call of the same entry (a stack
// per entry), which is program order at trace time and at run time alike.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "record/call_record.h"

namespace graphprobe {

enum class InsertMode : int { kEager = 0, kTraced = 1, kCaptured = 2 };

// What one part of a call looks like: the places of its tensors (by index)
// and its non-tensor leaves.
struct PartLayout {
  std::string entry;  // name template with "{n}"
  std::vector<Place> places;
  std::vector<int64_t> place_order;  // per tensor: position in argument order
  std::vector<bool> requires_grad;
  std::vector<Leaf> leaves;
  // Per tensor (may be shorter than places): extra fields of its record, as
  // (key, JSON text) pairs; a DTensor's placements and global shape.
  std::vector<std::vector<std::pair<std::string, std::string>>> extras;
  // A backward call's opening part (wiring/backward.py, api_backward.py):
  // the input site of its forward call, whose {n} the backward call takes
  // (msprobe names Module.a.Linear.backward.{n} and
  // Functional.linear.{n}.backward after their forward call); -1: none.
  int64_t forward_site = -1;
};

struct Site {
  int64_t call = -1;
  bool is_output = false;
  bool is_static = false;
  int64_t program = 0;   // static sites: the trace or capture they belong to
  int64_t position = 0;  // static sites: insertion order, which is program order
  int64_t step = 0;      // eager sites: the step whose call last described them
  // Null until a part describes the site. Shared and never changed in place
  // (a re-described eager site gets a new one), so that a CallTable copied
  // at the end of a step keeps describing that step.
  std::shared_ptr<const PartLayout> layout;
};

struct Call {
  std::string entry;
  int64_t input_site = -1;
  int64_t output_site = -1;
};

// The sites and calls, and the current step: what the call assembly reads.
// A copy costs a reference count per site, so step() can hand one to the
// writer thread, which names the step's calls while the next step's hooks
// already re-describe eager sites in the registry.
class CallTable {
 public:
  // nullptr for an id this table does not hold (cleared, or never made).
  const Site* site(int64_t id) const;
  const Call* call(int64_t id) const;
  // Whether the site describes a call of the current step (static sites
  // always do; an eager site only once its call ran in this step).
  bool is_current(const Site& s) const { return s.is_static || s.step == step_; }
  // Host memory a copy holds of its own (the layouts are shared).
  size_t copy_bytes() const;
  // Drops the sites (and with them the layouts they share), keeping the
  // memory of both vectors for the next snapshot_into (engine/step_rows.h).
  void release_layouts() { sites_.clear(); }

 protected:
  friend class CallRegistry;  // builds partial copies (snapshot)
  int64_t site_base_ = 0;  // id of sites_[0]
  int64_t call_base_ = 0;  // id of calls_[0]
  std::vector<Site> sites_;
  std::vector<Call> calls_;
  int64_t step_ = 0;
};

class CallRegistry : public CallTable {
 public:
  // The input part of a new call; returns its site.
  int64_t open(PartLayout layout, InsertMode mode, int64_t program);
  // The output part of the latest open call of layout.entry (a new call with
  // outputs only when none is open); returns its site.
  int64_t close(PartLayout layout, InsertMode mode, int64_t program);

  // A fresh program number for a trace; captures get theirs by capture id.
  int64_t new_program() { return ++programs_; }
  int64_t program_for_capture(uint64_t capture_id);

  // A step ended: eager calls are numbered from the first again and calls
  // left open (an exception inside a forward, an aborted trace) are dropped.
  void end_step();
  // Forgets every site and call (stop()). Ids are never handed out again, so
  // code compiled under an earlier dumper can be recognised and ignored.
  void clear();

  // The part of the table as it stands that assembling rows of `sites`
  // reads (assemble_calls), for assembling this step elsewhere:
  // those sites, their calls and both parts of each call, as the ranges of
  // ids that hold them. Other dumpers' and other graphs' sites, registered
  // before or after, are left out: the caller's thread copies only what
  // this step needs.
  CallTable snapshot(const std::vector<int64_t>& sites) const;
  // The same into `out`, reusing its vectors (and, where the same calls
  // come back, their entries' strings): step() allocates nothing there.
  void snapshot_into(const std::vector<int64_t>& sites, CallTable& out) const;

 private:
  int64_t new_call(const std::string& entry, bool is_static);
  int64_t new_site(int64_t call, bool is_output, bool is_static, int64_t program);
  int64_t eager_call(const std::string& entry);

  int64_t position_ = 0;
  int64_t programs_ = 0;
  std::unordered_map<uint64_t, int64_t> capture_programs_;
  std::unordered_map<std::string, std::vector<int64_t>> open_;         // entry -> open calls, innermost last
  std::unordered_map<std::string, std::vector<int64_t>> eager_calls_;  // entry -> reusable eager calls
  std::unordered_map<std::string, size_t> eager_used_;                 // entry -> eager calls used this step
};

}  // namespace graphprobe
