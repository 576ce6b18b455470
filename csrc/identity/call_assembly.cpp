#include "identity/call_assembly.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace graphprobe {
namespace {

using When = std::pair<double, double>;
// (is static, program or site, captured, instance): the rows of one run.
using RunKey = std::tuple<bool, int64_t, bool, int64_t>;
// (call, captured, instance): the rows of one call.
using InstanceKey = std::tuple<int64_t, bool, int64_t>;
// (run's first write, insertion position): program order.
using OrderKey = std::pair<When, int64_t>;

// A backward call (wiring/backward.py): "Module.a.Linear.backward.{n}",
// "Functional.linear.{n}.backward". Its input part (registered first, in the
// forward pre-hook) holds the gradients of the call's inputs, computed last
// in the backward pass; its output part (the forward hook) the gradients of
// its outputs, which start it.
bool is_backward_entry(const std::string& entry) {
  auto ends_with = [&](std::string_view tail) {
    return entry.size() >= tail.size() && entry.compare(entry.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends_with(".backward.{n}") || ends_with(".{n}.backward");
}

// Where a static backward site stands in its run: the backward pass runs the
// probes in the reverse of their insertion (forward) order, and after every
// forward probe of a run that holds both (a captured training step).
constexpr int64_t kBackwardBase = int64_t{1} << 62;

RunKey run_of(const Site& s, int64_t site_id, bool captured, int64_t instance) {
  return s.is_static ? RunKey{true, s.program, captured, instance} : RunKey{false, site_id, captured, instance};
}

struct Instance {
  const Call* call = nullptr;
  bool captured = false;
  int64_t instance = 0;
  std::vector<ExecutedRow*> rows;
  OrderKey start, end;
  int64_t n = 0;
  int64_t pass = 0;  // a backward call's pass over one forward execution: 0, then 1, 2, ... (retain_graph)
};

// "Module.a.Linear.backward.{n}" -> "Module.a.Linear.backward_pass1.{n}",
// "Functional.linear.{n}.backward" -> "Functional.linear.{n}.backward_pass1":
// msprobe's readers and graphprobe's compare take the direction from the last
// two components, so the repeated pass is never read as another call's
// backward; it is paired by its name.
std::string repeated_pass(const std::string& entry, int64_t pass) {
  const size_t at = entry.rfind(".backward");
  if (at == std::string::npos) return entry;
  const size_t end = at + std::string_view(".backward").size();
  return entry.substr(0, end) + "_pass" + std::to_string(pass) + entry.substr(end);
}

}  // namespace

std::vector<CallRecord> assemble_calls(const CallTable& registry, std::vector<ExecutedRow> rows) {
  std::map<RunKey, When> run_start;
  std::map<InstanceKey, Instance> instances;
  for (ExecutedRow& r : rows) {
    const Site* s = registry.site(r.site);
    if (s == nullptr || !s->layout || r.index < 0) continue;
    // Index 0 of a part without tensors is its marker (engine.cpp): the call
    // ran and is written with its non-tensor values, with no tensor.
    const bool marker = s->layout->places.empty() && r.index == 0;
    if (!marker && r.index >= static_cast<int64_t>(s->layout->places.size())) continue;
    const Call* c = registry.call(s->call);
    if (c == nullptr) continue;
    auto [it, fresh] = run_start.try_emplace(run_of(*s, r.site, r.captured, r.instance), r.when);
    if (!fresh) it->second = std::min(it->second, r.when);
    Instance& inst = instances[InstanceKey{s->call, r.captured, r.instance}];
    inst.call = c;
    inst.captured = r.captured;
    inst.instance = r.instance;
    inst.rows.push_back(&r);
  }

  // Where a part of an instance stands in program order, when known: its run
  // wrote something in this step (an input part without tensors still has a
  // place when another probe of its program ran).
  auto part_key = [&](int64_t site_id, const Instance& inst) -> std::optional<OrderKey> {
    const Site* s = registry.site(site_id);
    if (s == nullptr) return std::nullopt;
    auto it = run_start.find(run_of(*s, site_id, inst.captured, inst.instance));
    if (it == run_start.end()) return std::nullopt;
    const Call* c = registry.call(s->call);
    const bool backward = c != nullptr && is_backward_entry(c->entry);
    // A backward part without tensors (a module whose inputs need no
    // gradient, wiring/backward.py) never runs, not even a marker: it has no
    // place, in eager mode (no row) and compiled code alike, and the call is
    // ordered by its other part.
    if (backward && s->layout && s->layout->places.empty()) return std::nullopt;
    return OrderKey{it->second, backward && s->is_static ? kBackwardBase - s->position : s->position};
  };

  std::vector<Instance*> all;
  all.reserve(instances.size());
  for (auto& kv : instances) {
    Instance& inst = kv.second;
    std::optional<OrderKey> in = part_key(inst.call->input_site, inst);
    std::optional<OrderKey> out = part_key(inst.call->output_site, inst);
    if (is_backward_entry(inst.call->entry)) std::swap(in, out);  // starts with its outputs' gradients
    inst.start = in ? *in : *out;  // one of them holds this instance's rows
    inst.end = out ? *out : *in;
    all.push_back(&inst);
  }

  // Ties (never expected: runs have distinct first writes, static parts
  // distinct positions) fall back to the map's deterministic order.
  std::stable_sort(all.begin(), all.end(), [](const Instance* a, const Instance* b) { return a->start < b->start; });
  std::map<std::string, int64_t> counts;
  for (Instance* inst : all) inst->n = counts[inst->call->entry]++;
  // A backward call takes the {n} of its forward call (linked at
  // insertion, PartLayout::forward_site), as msprobe names it: forward calls
  // without a backward (under no_grad) must not shift the numbers.
  //
  // A call's k-th backward pass normally belongs to its forward call's k-th
  // execution. More backward passes than forward executions mean a second
  // pass over one forward call (backward(retain_graph=True), a gradient
  // penalty): each pass then belongs to the latest forward execution that
  // started before it, and a repeated pass is written
  // "...backward_pass{p}..." (docs/formats.md): "backward.1" would name the
  // gradients of a "forward.1".
  // (forward call, backward call, captured) -> the backward call's instances, in start order
  std::map<std::tuple<int64_t, int64_t, bool>, std::vector<Instance*>> passes;
  for (Instance* inst : all) {
    const Site* open = registry.site(inst->call->input_site);
    if (open == nullptr || !open->layout || open->layout->forward_site < 0) continue;
    const Site* fwd = registry.site(open->layout->forward_site);
    if (fwd == nullptr) continue;
    passes[{fwd->call, open->call, inst->captured}].push_back(inst);
  }
  for (auto& [key, list] : passes) {
    const int64_t fwd_call = std::get<0>(key);
    const bool captured = std::get<2>(key);
    std::vector<const Instance*> forwards;  // start order
    for (auto& kv : instances)
      if (std::get<0>(kv.first) == fwd_call && std::get<1>(kv.first) == captured) forwards.push_back(&kv.second);
    std::stable_sort(forwards.begin(), forwards.end(),
                     [](const Instance* a, const Instance* b) { return a->start < b->start; });
    if (list.size() <= forwards.size()) {
      for (Instance* inst : list) {
        auto it = instances.find(InstanceKey{fwd_call, inst->captured, inst->instance});
        if (it != instances.end()) inst->n = it->second.n;
      }
      continue;
    }
    std::map<const Instance*, int64_t> seen;  // passes per forward execution so far
    for (Instance* inst : list) {
      const Instance* owner = forwards.empty() ? nullptr : forwards.front();
      for (const Instance* f : forwards)
        if (f->start < inst->start) owner = f;
      if (owner == nullptr) continue;
      inst->n = owner->n;
      inst->pass = seen[owner]++;
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Instance* a, const Instance* b) { return a->end < b->end; });

  std::vector<CallRecord> calls;
  calls.reserve(all.size());
  for (Instance* inst : all) {
    CallRecord rec;
    rec.name = entry_name(inst->pass > 0 ? repeated_pass(inst->call->entry, inst->pass) : inst->call->entry, inst->n);
    std::sort(inst->rows.begin(), inst->rows.end(), [&](const ExecutedRow* a, const ExecutedRow* b) {
      const bool ao = registry.site(a->site)->is_output, bo = registry.site(b->site)->is_output;
      return std::make_pair(ao, a->index) < std::make_pair(bo, b->index);
    });
    for (ExecutedRow* r : inst->rows) {
      const PartLayout& layout = *registry.site(r->site)->layout;
      if (layout.places.empty()) continue;  // a marker: no tensor
      const size_t i = static_cast<size_t>(r->index);
      TensorRow t = std::move(r->row);
      t.place = layout.places[i];
      t.order = i < layout.place_order.size() ? layout.place_order[i] : 0;
      t.requires_grad = i < layout.requires_grad.size() && layout.requires_grad[i];
      if (i < layout.extras.size()) t.extras = layout.extras[i];
      rec.tensors.push_back(std::move(t));
    }
    // The non-tensor values of the parts this execution ran. A part with
    // tensors that left no row did not run, and has none to show: a compiled
    // call whose output hook dynamo traced again (a number it describes
    // changed: expert counts from .tolist()) gets that part as a call of its
    // own, and the first trace's output site, still current, held the old
    // numbers. A part without tensors may have left no row: its leaves stay.
    bool ran[2] = {false, false};
    for (const ExecutedRow* r : inst->rows)
      if (const Site* s = registry.site(r->site); s != nullptr) ran[s->is_output ? 1 : 0] = true;
    const int64_t parts[2] = {inst->call->input_site, inst->call->output_site};
    for (int k = 0; k < 2; ++k) {
      const Site* s = registry.site(parts[k]);
      if (s == nullptr || !s->layout || !registry.is_current(*s)) continue;
      if (!ran[k] && !s->layout->places.empty()) continue;
      rec.leaves.insert(rec.leaves.end(), s->layout->leaves.begin(), s->layout->leaves.end());
    }
    calls.push_back(std::move(rec));
  }
  return calls;
}

}  // namespace graphprobe
