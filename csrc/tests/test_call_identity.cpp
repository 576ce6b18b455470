// Record identity: calls paired, numbered and ordered from their sites, the
// same whatever order the probes ran in.
#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "identity/call_assembly.h"
#include "identity/call_registry.h"

using graphprobe::CallRecord;
using graphprobe::CallRegistry;
using graphprobe::ExecutedRow;
using graphprobe::InsertMode;
using graphprobe::PartLayout;

namespace {

const std::string kParent = "Module.blk.Block.forward.{n}";
const std::string kChild = "Module.blk.fc.Linear.forward.{n}";

PartLayout part(const std::string& entry, const std::string& name, int tensors) {
  PartLayout p;
  p.entry = entry;
  for (int i = 0; i < tensors; ++i) {
    p.places.push_back({name, std::to_string(i)});
    p.place_order.push_back(i);
    p.requires_grad.push_back(false);
  }
  return p;
}

// One executed probe: `when` is the order in which the backend ran it.
ExecutedRow probe(int64_t site, int64_t index, double when, int64_t instance = 0, bool captured = false) {
  ExecutedRow r;
  r.site = site;
  r.index = index;
  r.when = {0, when};
  r.instance = instance;
  r.captured = captured;
  r.row.numel = 1;
  r.row.max = when;  // lets a check see which execution a record holds
  return r;
}

std::vector<std::string> names(const std::vector<CallRecord>& calls) {
  std::vector<std::string> out;
  for (const auto& c : calls) out.push_back(c.name);
  return out;
}

// The parent opens, its child runs twice, the parent closes; `mode` says how
// the parts were inserted. Returns the sites in program order.
std::vector<int64_t> wire_block(CallRegistry& reg, InsertMode mode, int64_t program) {
  std::vector<int64_t> sites;
  sites.push_back(reg.open(part(kParent, "input_args", 1), mode, program));
  for (int i = 0; i < 2; ++i) {
    sites.push_back(reg.open(part(kChild, "input_args", 1), mode, program));
    sites.push_back(reg.close(part(kChild, "output", 1), mode, program));
  }
  sites.push_back(reg.close(part(kParent, "output", 1), mode, program));
  return sites;
}

// One eager call of kChild: `tensors` input tensors then an int argument
// (`digits`), one output tensor. Returns its input and output sites.
std::pair<int64_t, int64_t> child_with_int_arg(CallRegistry& reg, int tensors, const std::string& digits) {
  PartLayout in = part(kChild, "input_args", tensors);
  graphprobe::Leaf arg;
  arg.place = {"input_args", std::to_string(tensors)};
  arg.type = "int";
  arg.kind = graphprobe::Leaf::Kind::kInt;
  arg.text = digits;
  in.leaves.push_back(arg);
  const int64_t s_in = reg.open(in, InsertMode::kEager, 0);
  return {s_in, reg.close(part(kChild, "output", 1), InsertMode::kEager, 0)};
}

const std::vector<std::string> kBlockOrder = {"Module.blk.fc.Linear.forward.0", "Module.blk.fc.Linear.forward.1",
                                              "Module.blk.Block.forward.0"};

void eager_calls_follow_execution() {
  CallRegistry reg;
  const auto sites = wire_block(reg, InsertMode::kEager, 0);
  std::vector<ExecutedRow> rows;
  for (size_t i = 0; i < sites.size(); ++i) rows.push_back(probe(sites[i], 0, static_cast<double>(i)));
  const auto calls = assemble_calls(reg, rows);
  CHECK(names(calls) == kBlockOrder);
  CHECK_EQ(calls[0].tensors.size(), size_t{2});
  CHECK_EQ(calls[0].tensors[0].max, 1.0);  // the first child's input ran second
  // The next step reuses the same eager calls: ids stay bounded.
  reg.end_step();
  const auto again = wire_block(reg, InsertMode::kEager, 0);
  CHECK(again == sites);
}

void static_calls_ignore_the_schedule() {
  // Every permutation a scheduler could pick gives the same calls.
  CallRegistry reg;
  const auto sites = wire_block(reg, InsertMode::kTraced, reg.new_program());
  std::mt19937 gen(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> when(sites.size());
    for (size_t i = 0; i < when.size(); ++i) when[i] = static_cast<double>(i);
    std::shuffle(when.begin(), when.end(), gen);
    std::vector<ExecutedRow> rows;
    for (size_t i = 0; i < sites.size(); ++i) rows.push_back(probe(sites[i], 0, when[i]));
    const auto calls = assemble_calls(reg, rows);
    CHECK(names(calls) == kBlockOrder);
    // The second child call holds the rows of the second child sites.
    CHECK_EQ(calls[1].tensors[0].max, when[3]);
    CHECK_EQ(calls[1].tensors[1].max, when[4]);
  }
}

void a_compiled_model_run_twice_numbers_as_eager() {
  CallRegistry reg;
  const auto sites = wire_block(reg, InsertMode::kTraced, reg.new_program());
  // Two runs of the graph in one step; inside each run the scheduler reverses
  // the probes. Instance k holds the k-th execution of each probe.
  std::vector<ExecutedRow> rows;
  double t = 0;
  for (int64_t run = 0; run < 2; ++run)
    for (size_t i = sites.size(); i-- > 0;) rows.push_back(probe(sites[i], 0, t++, run));
  const auto calls = assemble_calls(reg, rows);
  CHECK(names(calls) == (std::vector<std::string>{
                            "Module.blk.fc.Linear.forward.0", "Module.blk.fc.Linear.forward.1",
                            "Module.blk.Block.forward.0", "Module.blk.fc.Linear.forward.2",
                            "Module.blk.fc.Linear.forward.3", "Module.blk.Block.forward.1"}));
}

void runs_of_different_graphs_keep_their_order() {
  // A graph break: graph A opens the parent and runs the first child; graph B
  // runs the second child and closes the parent. B was traced after A but a
  // later step could run them in either order; runs are placed by their
  // first write.
  CallRegistry reg;
  const int64_t a = reg.new_program(), b = reg.new_program();
  const int64_t p_in = reg.open(part(kParent, "input_args", 1), InsertMode::kTraced, a);
  const int64_t c1_in = reg.open(part(kChild, "input_args", 1), InsertMode::kTraced, a);
  const int64_t c1_out = reg.close(part(kChild, "output", 1), InsertMode::kTraced, a);
  const int64_t c2_in = reg.open(part(kChild, "input_args", 1), InsertMode::kTraced, b);
  const int64_t c2_out = reg.close(part(kChild, "output", 1), InsertMode::kTraced, b);
  const int64_t p_out = reg.close(part(kParent, "output", 1), InsertMode::kTraced, b);
  const std::vector<ExecutedRow> rows = {probe(c1_out, 0, 1), probe(p_in, 0, 2), probe(c1_in, 0, 3),
                                         probe(p_out, 0, 10), probe(c2_out, 0, 11), probe(c2_in, 0, 12)};
  const auto calls = assemble_calls(reg, rows);
  CHECK(names(calls) == kBlockOrder);
  CHECK_EQ(calls[2].tensors.size(), size_t{2});  // the parent spans both graphs
}

void captured_executions_are_separate_calls() {
  // One static call captured in two graphs (two batch sizes): each capture
  // is its own instance; both replayed in one step give two calls.
  CallRegistry reg;
  const int64_t program = reg.new_program();
  const int64_t in = reg.open(part(kChild, "input_args", 1), InsertMode::kTraced, program);
  const int64_t out = reg.close(part(kChild, "output", 1), InsertMode::kTraced, program);
  const std::vector<ExecutedRow> rows = {probe(out, 0, 1, 1, true), probe(in, 0, 2, 1, true),
                                         probe(out, 0, 5, 0, true), probe(in, 0, 4, 0, true)};
  const auto calls = assemble_calls(reg, rows);
  CHECK(names(calls) == (std::vector<std::string>{"Module.blk.fc.Linear.forward.0", "Module.blk.fc.Linear.forward.1"}));
  CHECK_EQ(calls[0].tensors[0].max, 2.0);  // capture 1 replayed first
}

void calls_with_different_tensor_counts_stay_apart() {
  // `x * 2` (one tensor input) then `a * b` (two): each call has its own sites.
  CallRegistry reg;
  const std::string mul = "Tensor.__mul__.{n}.forward";
  const int64_t a_in = reg.open(part(mul, "input_args", 1), InsertMode::kEager, 0);
  const int64_t a_out = reg.close(part(mul, "output", 1), InsertMode::kEager, 0);
  const int64_t b_in = reg.open(part(mul, "input_args", 2), InsertMode::kEager, 0);
  const int64_t b_out = reg.close(part(mul, "output", 1), InsertMode::kEager, 0);
  const auto calls = assemble_calls(
      reg, {probe(a_in, 0, 0), probe(a_out, 0, 1), probe(b_in, 0, 2), probe(b_in, 1, 3), probe(b_out, 0, 4)});
  CHECK(names(calls) == (std::vector<std::string>{"Tensor.__mul__.0.forward", "Tensor.__mul__.1.forward"}));
  CHECK_EQ(calls[1].tensors.size(), size_t{3});
}

void mixed_halves_and_orphans() {
  CallRegistry reg;
  // A static open followed by an eager close (a hook run outside the graph):
  // the close makes its own call instead of attaching to the static one.
  const int64_t s_in = reg.open(part(kChild, "input_args", 1), InsertMode::kTraced, reg.new_program());
  const int64_t e_out = reg.close(part(kChild, "output", 1), InsertMode::kEager, 0);
  CHECK(reg.site(s_in)->call != reg.site(e_out)->call);
  // The static call is still open for its own static close.
  const int64_t s_out = reg.close(part(kChild, "output", 1), InsertMode::kTraced, 1);
  CHECK_EQ(reg.site(s_in)->call, reg.site(s_out)->call);
  // A close with nothing open (start() called inside a forward) still records.
  const int64_t orphan = reg.close(part(kParent, "output", 1), InsertMode::kEager, 0);
  const auto calls = assemble_calls(reg, {probe(orphan, 0, 0)});
  CHECK(names(calls) == (std::vector<std::string>{"Module.blk.Block.forward.0"}));
}

void cleared_ids_are_never_reused() {
  CallRegistry reg;
  const int64_t before = reg.open(part(kChild, "input_args", 1), InsertMode::kTraced, reg.new_program());
  reg.clear();
  CHECK(reg.site(before) == nullptr);
  const int64_t after = reg.open(part(kChild, "input_args", 1), InsertMode::kTraced, reg.new_program());
  CHECK(after != before);
  // Rows of an unknown site, or an index past the part's tensors, are left out.
  const auto calls = assemble_calls(reg, {probe(before, 0, 0), probe(after, 5, 1)});
  CHECK(calls.empty());
}

void leaves_come_from_both_parts() {
  CallRegistry reg;
  const auto [s_in, s_out] = child_with_int_arg(reg, 1, "-1");
  auto calls = assemble_calls(reg, {probe(s_in, 0, 0), probe(s_out, 0, 1)});
  CHECK_EQ(calls.size(), size_t{1});
  CHECK_EQ(calls[0].leaves.size(), size_t{1});
  // Next step, the same eager call closes without opening (the pre-hook was
  // removed): last step's input leaves are not this step's.
  reg.end_step();
  const int64_t again = reg.close(part(kChild, "output", 1), InsertMode::kEager, 0);
  calls = assemble_calls(reg, {probe(again, 0, 0)});
  CHECK_EQ(calls.size(), size_t{1});
  CHECK(calls[0].leaves.empty());
}

// step() hands a snapshot of the table to the writer thread, which names the
// step's calls while the next step's hooks already re-describe the same eager
// sites: the snapshot must keep describing the step it was taken at.
void a_snapshot_keeps_its_step() {
  CallRegistry reg;
  const auto [s_in, s_out] = child_with_int_arg(reg, 2, "7");
  const graphprobe::CallTable snap = reg.snapshot({s_in, s_out});
  reg.end_step();
  // Next step: one input tensor, no leaf, and a new kwargs output layout.
  CHECK(reg.open(part(kChild, "input_args", 1), InsertMode::kEager, 0) == s_in);
  CHECK(reg.close(part(kChild, "output_kwargs", 1), InsertMode::kEager, 0) == s_out);
  const auto calls = assemble_calls(snap, {probe(s_in, 0, 0), probe(s_in, 1, 1), probe(s_out, 0, 2)});
  CHECK(names(calls) == (std::vector<std::string>{"Module.blk.fc.Linear.forward.0"}));
  CHECK_EQ(calls[0].tensors.size(), size_t{3});  // index 1 exists only in the snapshot's layout
  CHECK(calls[0].tensors[2].place == (graphprobe::Place{"output", "0"}));
  CHECK_EQ(calls[0].leaves.size(), size_t{1});
  CHECK_EQ(calls[0].leaves[0].text, std::string("7"));
  // The live registry describes the new step.
  const auto live = assemble_calls(reg, {probe(s_in, 0, 0), probe(s_in, 1, 1), probe(s_out, 0, 2)});
  CHECK_EQ(live[0].tensors.size(), size_t{2});
  CHECK(live[0].tensors[1].place == (graphprobe::Place{"output_kwargs", "0"}));
  CHECK(live[0].leaves.empty());
}

// step() copies only the part of the table that its rows need: their sites,
// their calls and both parts of each call (a part without tensors still
// carries leaves), and nothing of the graphs registered around them.
void a_partial_snapshot_holds_what_its_rows_need() {
  CallRegistry reg;
  const auto before = wire_block(reg, InsertMode::kTraced, reg.new_program());
  const int64_t program = reg.new_program();
  const auto block = wire_block(reg, InsertMode::kTraced, program);
  // A call whose output is an int: its output part has a leaf and no tensor.
  const int64_t s_in = reg.open(part(kChild, "input_args", 1), InsertMode::kTraced, program);
  PartLayout out = part(kChild, "output", 0);
  graphprobe::Leaf value;
  value.place = {"output", "0"};
  value.type = "int";
  value.kind = graphprobe::Leaf::Kind::kInt;
  value.text = "3";
  out.leaves.push_back(value);
  const int64_t s_out = reg.close(out, InsertMode::kTraced, program);
  const auto after = wire_block(reg, InsertMode::kTraced, reg.new_program());
  std::vector<ExecutedRow> rows;
  std::vector<int64_t> sites;
  for (int64_t site : block) sites.push_back(site);
  sites.push_back(s_in);
  for (size_t i = 0; i < sites.size(); ++i) rows.push_back(probe(sites[i], 0, static_cast<double>(i)));
  const graphprobe::CallTable snap = reg.snapshot(sites);
  CHECK(snap.site(s_out) != nullptr);  // no row, but the last call's other part
  CHECK(snap.site(before.back()) == nullptr && snap.site(after.front()) == nullptr);
  const auto got = assemble_calls(snap, rows);
  const auto want = assemble_calls(reg, rows);
  CHECK(names(got) == names(want));
  CHECK_EQ(got.size(), size_t{4});
  CHECK_EQ(got[3].name, std::string("Module.blk.fc.Linear.forward.2"));
  CHECK_EQ(got[3].leaves.size(), size_t{1});
  CHECK_EQ(got[3].leaves[0].text, std::string("3"));
  for (size_t i = 0; i < got.size(); ++i) CHECK_EQ(got[i].tensors.size(), want[i].tensors.size());
  // Rows of no known site: an empty table.
  CHECK(reg.snapshot({-5}).site(s_in) == nullptr);
}

// An L1 backward call takes its forward call's {n} (PartLayout::forward_site):
// the first forward call, made under no_grad, has no backward, and must not
// make the second call's backward "backward.0". Eager and static alike.
void a_linked_backward_takes_its_forward_number() {
  const std::string fwd = "Functional.linear.{n}.forward", bwd = "Functional.linear.{n}.backward";
  for (const InsertMode mode : {InsertMode::kEager, InsertMode::kTraced}) {
    CallRegistry reg;
    const int64_t program = mode == InsertMode::kEager ? 0 : reg.new_program();
    const int64_t f0_in = reg.open(part(fwd, "input_args", 1), mode, program);
    const int64_t f0_out = reg.close(part(fwd, "output", 1), mode, program);
    const int64_t f1_in = reg.open(part(fwd, "input_args", 1), mode, program);
    PartLayout grads_in = part(bwd, "output", 1);
    grads_in.forward_site = f1_in;
    const int64_t b_open = reg.open(std::move(grads_in), mode, program);
    const int64_t f1_out = reg.close(part(fwd, "output", 1), mode, program);
    const int64_t b_close = reg.close(part(bwd, "input", 1), mode, program);
    const auto calls = assemble_calls(reg, {probe(f0_in, 0, 0), probe(f0_out, 0, 1), probe(f1_in, 0, 2),
                                            probe(f1_out, 0, 3), probe(b_close, 0, 4), probe(b_open, 0, 5)});
    CHECK(names(calls) == (std::vector<std::string>{"Functional.linear.0.forward", "Functional.linear.1.forward",
                                                    "Functional.linear.1.backward"}));
  }
}

// A module called three times (wiring/backward.py): each backward call is
// opened in the forward pre-hook without tensors (the model's input needs no
// gradient), linked to its forward call, and closed with the gradient of the
// output. The backward pass reaches the third call first; its record is
// backward.2, as msprobe names it, in eager mode and in a compiled backward
// (static sites of a backward program of their own, run in reverse).
void a_module_called_three_times_names_each_backward_after_its_forward() {
  const std::string fwd = "Module.shared.Linear.forward.{n}", bwd = "Module.shared.Linear.backward.{n}";
  for (const InsertMode mode : {InsertMode::kEager, InsertMode::kTraced}) {
    CallRegistry reg;
    const int64_t program = mode == InsertMode::kEager ? 0 : reg.new_program();
    const int64_t backward_program = mode == InsertMode::kEager ? 0 : reg.new_program();
    std::vector<int64_t> f_in, f_out, b_close;
    for (int k = 0; k < 3; ++k) {
      f_in.push_back(reg.open(part(fwd, "input_args", 1), mode, program));
      PartLayout opening = part(bwd, "output", 0);
      opening.forward_site = f_in.back();
      reg.open(std::move(opening), mode, backward_program);
      f_out.push_back(reg.close(part(fwd, "output", 1), mode, program));
      b_close.push_back(reg.close(part(bwd, "input", 1), mode, backward_program));
    }
    std::vector<ExecutedRow> rows;
    double when = 0;
    for (int k = 0; k < 3; ++k) {
      rows.push_back(probe(f_in[k], 0, when++));
      rows.push_back(probe(f_out[k], 0, when++));
    }
    for (int k = 2; k >= 0; --k) rows.push_back(probe(b_close[k], 0, when++));
    CHECK(names(assemble_calls(reg, rows)) ==
          (std::vector<std::string>{"Module.shared.Linear.forward.0", "Module.shared.Linear.forward.1",
                                    "Module.shared.Linear.forward.2", "Module.shared.Linear.backward.2",
                                    "Module.shared.Linear.backward.1", "Module.shared.Linear.backward.0"}));
  }
}

// A parent module whose inputs need no gradient (a model called with
// input_ids) has a backward call opened without tensors; its record is
// ordered by its outputs' gradients, which arrive before its child's: in
// compiled code as in eager mode (the empty part's insertion position, the
// earliest, would put it after every backward record of the pass).
void a_backward_call_without_input_gradients_is_ordered_by_its_outputs() {
  const std::string pf = "Module.model.Model.forward.{n}", pb = "Module.model.Model.backward.{n}";
  const std::string cf = "Module.model.norm.Norm.forward.{n}", cb = "Module.model.norm.Norm.backward.{n}";
  for (const InsertMode mode : {InsertMode::kEager, InsertMode::kTraced}) {
    CallRegistry reg;
    const int64_t program = mode == InsertMode::kEager ? 0 : reg.new_program();
    const int64_t backward_program = mode == InsertMode::kEager ? 0 : reg.new_program();
    const int64_t p_in = reg.open(part(pf, "input_args", 1), mode, program);
    PartLayout p_grads_in = part(pb, "output", 0);
    p_grads_in.forward_site = p_in;
    reg.open(std::move(p_grads_in), mode, backward_program);
    const int64_t c_in = reg.open(part(cf, "input_args", 1), mode, program);
    PartLayout c_grads_in = part(cb, "output", 1);
    c_grads_in.forward_site = c_in;
    const int64_t c_open = reg.open(std::move(c_grads_in), mode, backward_program);
    const int64_t c_out = reg.close(part(cf, "output", 1), mode, program);
    const int64_t c_close = reg.close(part(cb, "input", 1), mode, backward_program);
    const int64_t p_out = reg.close(part(pf, "output", 1), mode, program);
    const int64_t p_close = reg.close(part(pb, "input", 1), mode, backward_program);
    const auto calls = assemble_calls(reg, {probe(p_in, 0, 0), probe(c_in, 0, 1), probe(c_out, 0, 2),
                                            probe(p_out, 0, 3), probe(p_close, 0, 4), probe(c_close, 0, 5),
                                            probe(c_open, 0, 6)});
    CHECK(names(calls) == (std::vector<std::string>{"Module.model.norm.Norm.forward.0", "Module.model.Model.forward.0",
                                                    "Module.model.Model.backward.0",
                                                    "Module.model.norm.Norm.backward.0"}));
  }
}

void run() {
  a_linked_backward_takes_its_forward_number();
  a_backward_call_without_input_gradients_is_ordered_by_its_outputs();
  a_module_called_three_times_names_each_backward_after_its_forward();
  eager_calls_follow_execution();
  static_calls_ignore_the_schedule();
  a_compiled_model_run_twice_numbers_as_eager();
  runs_of_different_graphs_keep_their_order();
  captured_executions_are_separate_calls();
  calls_with_different_tensor_counts_stay_apart();
  mixed_halves_and_orphans();
  cleared_ids_are_never_reused();
  leaves_come_from_both_parts();
  a_snapshot_keeps_its_step();
  a_partial_snapshot_holds_what_its_rows_need();
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run)
