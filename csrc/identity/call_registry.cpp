#include "identity/call_registry.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace graphprobe {

const Site* CallTable::site(int64_t id) const {
  const int64_t i = id - site_base_;
  return i >= 0 && i < static_cast<int64_t>(sites_.size()) ? &sites_[static_cast<size_t>(i)] : nullptr;
}

const Call* CallTable::call(int64_t id) const {
  const int64_t i = id - call_base_;
  return i >= 0 && i < static_cast<int64_t>(calls_.size()) ? &calls_[static_cast<size_t>(i)] : nullptr;
}

size_t CallTable::copy_bytes() const {
  size_t n = sites_.capacity() * sizeof(Site) + calls_.capacity() * sizeof(Call);
  for (const Call& c : calls_) n += c.entry.capacity();
  return n;
}

CallTable CallRegistry::snapshot(const std::vector<int64_t>& sites) const {
  CallTable out;
  snapshot_into(sites, out);
  return out;
}

void CallRegistry::snapshot_into(const std::vector<int64_t>& sites, CallTable& out) const {
  out.step_ = step_;
  out.site_base_ = 0;
  out.call_base_ = 0;
  out.sites_.clear();  // releases the layouts it held; its memory stays
  int64_t lo = INT64_MAX, hi = -1, call_lo = INT64_MAX, call_hi = -1;
  auto cover = [&](int64_t id) {
    if (site(id) == nullptr) return;
    lo = std::min(lo, id);
    hi = std::max(hi, id);
  };
  for (const int64_t id : sites) {
    const Site* s = site(id);
    if (s == nullptr) continue;
    cover(id);
    if (const Call* c = call(s->call)) {
      call_lo = std::min(call_lo, s->call);
      call_hi = std::max(call_hi, s->call);
      cover(c->input_site);
      cover(c->output_site);
    }
  }
  if (hi >= lo) {
    out.site_base_ = lo;
    out.sites_.assign(sites_.begin() + (lo - site_base_), sites_.begin() + (hi - site_base_ + 1));
  }
  if (call_hi >= call_lo) {
    out.call_base_ = call_lo;
    // Assigned over the old elements: their strings keep their memory.
    out.calls_.assign(calls_.begin() + (call_lo - call_base_), calls_.begin() + (call_hi - call_base_ + 1));
  } else {
    out.calls_.clear();
  }
}

int64_t CallRegistry::new_call(const std::string& entry, bool is_static) {
  calls_.push_back(Call{entry, -1, -1});
  const int64_t id = call_base_ + static_cast<int64_t>(calls_.size()) - 1;
  if (!is_static) {
    // Eager calls own both their sites for good: reused every step.
    const int64_t in = new_site(id, false, false, 0);
    const int64_t out = new_site(id, true, false, 0);
    Call& c = calls_.back();
    c.input_site = in;
    c.output_site = out;
  }
  return id;
}

int64_t CallRegistry::new_site(int64_t call, bool is_output, bool is_static, int64_t program) {
  Site s;
  s.call = call;
  s.is_output = is_output;
  s.is_static = is_static;
  s.program = program;
  s.position = is_static ? ++position_ : 0;
  sites_.push_back(std::move(s));
  return site_base_ + static_cast<int64_t>(sites_.size()) - 1;
}

int64_t CallRegistry::eager_call(const std::string& entry) {
  auto& pool = eager_calls_[entry];
  size_t& used = eager_used_[entry];
  if (used == pool.size()) pool.push_back(new_call(entry, false));
  return pool[used++];
}

int64_t CallRegistry::program_for_capture(uint64_t capture_id) {
  auto it = capture_programs_.find(capture_id);
  if (it == capture_programs_.end()) it = capture_programs_.emplace(capture_id, new_program()).first;
  return it->second;
}

int64_t CallRegistry::open(PartLayout layout, InsertMode mode, int64_t program) {
  const std::string entry = layout.entry;
  int64_t site_id;
  int64_t call_id;
  if (mode == InsertMode::kEager) {
    call_id = eager_call(entry);
    site_id = call(call_id)->input_site;
  } else {
    call_id = new_call(entry, true);
    site_id = new_site(call_id, false, true, program);
    calls_[static_cast<size_t>(call_id - call_base_)].input_site = site_id;
  }
  Site& s = sites_[static_cast<size_t>(site_id - site_base_)];
  s.layout = std::make_shared<const PartLayout>(std::move(layout));
  s.step = step_;
  open_[entry].push_back(call_id);
  return site_id;
}

int64_t CallRegistry::close(PartLayout layout, InsertMode mode, int64_t program) {
  const std::string entry = layout.entry;
  auto& stack = open_[entry];
  const bool is_static = mode != InsertMode::kEager;
  int64_t call_id = stack.empty() ? -1 : stack.back();
  const Call* found = call_id >= 0 ? call(call_id) : nullptr;
  // A close joins an open call of its own kind only: a static call has no
  // eager counterpart at run time (compiled code runs no hooks), and an
  // eager call's sites are reused every step, so a static part must not
  // attach to it. Mixed halves (a graph break that runs one hook eagerly)
  // become two records, the same in every run.
  const bool usable = found != nullptr && site(found->input_site)->is_static == is_static;
  if (usable) stack.pop_back();
  else call_id = is_static ? new_call(entry, true) : eager_call(entry);
  int64_t site_id;
  if (is_static) {
    site_id = new_site(call_id, true, true, program);
    calls_[static_cast<size_t>(call_id - call_base_)].output_site = site_id;
  } else {
    site_id = call(call_id)->output_site;
  }
  Site& s = sites_[static_cast<size_t>(site_id - site_base_)];
  s.layout = std::make_shared<const PartLayout>(std::move(layout));
  s.step = step_;
  return site_id;
}

void CallRegistry::end_step() {
  ++step_;
  // Emptied in place rather than cleared: the keys come back next step, and
  // freeing and remaking their nodes (and strings) cost step() and the next
  // forward a few hundred allocator calls (issue 39).
  for (auto& kv : open_) kv.second.clear();
  for (auto& kv : eager_used_) kv.second = 0;
}

void CallRegistry::clear() {
  site_base_ += static_cast<int64_t>(sites_.size());
  call_base_ += static_cast<int64_t>(calls_.size());
  sites_.clear();
  calls_.clear();
  capture_programs_.clear();
  open_.clear();
  eager_calls_.clear();
  eager_used_.clear();
}

}  // namespace graphprobe
