#include "compare/cancellation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>

#include "compare/entry_ranges.h"
#include "compare/forward_of.h"
#include "compare/module_entry_name.h"
#include "compare/parameter_inputs.h"
#include "compare/record_fingerprint.h"

namespace graphprobe::compare {
namespace {

bool floating_tensor(const TensorRecord& r) {
  if (!r.is_tensor || !r.shape_text.empty()) return false;
  return r.dtype.find("float") != std::string::npos || r.dtype.find("half") != std::string::npos ||
         r.dtype.find("double") != std::string::npos;
}

double numel(const TensorRecord& r) {
  double n = 1;
  for (int64_t d : r.shape) n *= static_cast<double>(d);
  return n;
}

double rms(const TensorRecord& r) {
  const double n = numel(r);
  const OptDouble& norm = r.stats[kStatNorm];
  return norm && std::isfinite(*norm) && n > 0 ? std::fabs(*norm) / std::sqrt(n) : 0.0;
}

}  // namespace

std::vector<double> expected_rms_from_producers(const CompareResult& result, double margin,
                                                std::vector<double>* sum_condition) {
  const Dump& target = result.target;
  const Dump& bench = result.bench;
  const auto& rows = result.rows;
  std::vector<double> expected(rows.size(), 0.0);
  // Filled at its first value: a dump without parameters_grad entries
  // (inference, every compare benchmark) allocates nothing for it.
  if (sum_condition) sum_condition->clear();
  const auto ranges = entry_ranges(target, rows);
  // Entry name -> index into ranges, filled at the first lookup: only
  // backward and parameters_grad entries look a range up, and a dump of
  // forward calls alone (inference) would fill it for nothing (a node and
  // a hash of a long name per entry; the first-divergence stage was
  // 1.4x slower with it on a 100 MB dump of forward calls).
  std::unordered_map<std::string_view, size_t> range_of;
  bool range_of_filled = false;

  auto matched_bench = [&](size_t i) -> const TensorRecord* {
    if (rows[i].match != MatchKind::kMatched) return nullptr;
    const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
    return floating_tensor(b) ? &b : nullptr;
  };
  auto role = [&](size_t i) { return target.rows[static_cast<size_t>(rows[i].target)].role; };
  auto is_param = [&](size_t i) {
    return is_parameter_row(target.rows[static_cast<size_t>(rows[i].target)], target.entries);
  };
  // The largest RMS of an entry's floating rows of one role (parameters
  // left out).
  auto peak_rms = [&](size_t k, Role r) {
    double best = 0;
    for (size_t i = ranges[k].first; i < ranges[k].second; ++i) {
      const TensorRecord* b = matched_bench(i);
      if (b == nullptr || role(i) != r || is_param(i)) continue;
      best = std::max(best, rms(*b));
    }
    return best;
  };
  auto range_named = [&](const std::string& name) -> const std::pair<size_t, size_t>* {
    if (name.empty()) return nullptr;
    if (!range_of_filled) {
      range_of_filled = true;
      range_of.reserve(ranges.size());
      for (size_t k = 0; k < ranges.size(); ++k)
        range_of.emplace(target.entries[target.rows[static_cast<size_t>(rows[ranges[k].first].target)].entry], k);
    }
    const auto it = range_of.find(name);
    return it == range_of.end() ? nullptr : &ranges[it->second];
  };
  // Expected RMS of rows already given one, by the fingerprints of both
  // sides' records: a later input is the same residue passed on only when
  // it is the same tensor on both sides. When only the bench's matches,
  // code between the two records changed the target's (a fault there is
  // judged at the record's own size).
  std::unordered_map<std::string, double> carried;
  auto both = [&](size_t i, const TensorRecord& b) {
    return fingerprint(b) + '\n' + fingerprint(target.rows[static_cast<size_t>(rows[i].target)]);
  };
  auto give = [&](size_t i, const TensorRecord& b, double want) {
    // The margin decides whether the record is a residue at all (a gain
    // estimated from the forward call can be off by sqrt(fan_out / fan_in));
    // a residue is then measured against the whole scale it was cancelled
    // from: its rounding is that of the terms it summed, whose size that is.
    if (want / margin <= rms(b)) return;
    expected[i] = want;
    carried[both(i, b)] = want;
  };

  // The forward call's data inputs in order (F.linear(x, weight, bias)):
  // the backward's output j is the gradient of input j.
  auto forward_inputs = [&](const std::pair<size_t, size_t>& fwd) {
    std::vector<const TensorRecord*> out;
    for (size_t i = fwd.first; i < fwd.second; ++i)
      if (role(i) == Role::kInput && !is_param(i)) out.push_back(matched_bench(i));
    return out;
  };
  // Gradient contributions: autograd sums the gradients that a tensor's
  // consumers send back, without a record. Per forward tensor (its bench
  // record's fingerprint, for every consumer that took it as an input), the
  // largest RMS of a contribution (the consumer's backward output for that
  // input). A sum far smaller than its terms is a cancellation (the input of
  // a final norm under a loss its scale does not change: the gradients
  // through x and through its variance nearly cancel), judged against them.
  // Each range's forward call (null for a forward call), looked up once.
  std::vector<const std::pair<size_t, size_t>*> forward_range(ranges.size(), nullptr);
  for (size_t k = 0; k < ranges.size(); ++k)
    forward_range[k] =
        range_named(forward_of(target.entries[target.rows[static_cast<size_t>(rows[ranges[k].first].target)].entry]));
  // The parameters_grad records under each parent module, by parameter
  // name ("Module.a.attention|bias"): entry range, bench RMS, shape. Filled
  // at the first module without a backward call (most dumps have none).
  struct Sibling {
    size_t range;
    double rms;
    const Shape* shape;
  };
  std::unordered_map<std::string, std::vector<Sibling>> siblings;
  bool siblings_filled = false;
  // "Module.a.attention.k_proj.Linear" -> "Module.a.attention".
  auto parent_of = [](std::string_view module) {
    for (int n = 0; n < 2; ++n) {
      const size_t dot = module.rfind('.');
      module = dot == std::string_view::npos ? std::string_view() : module.substr(0, dot);
    }
    return std::string(module);
  };
  auto sibling_scale = [&](size_t k, const std::string& module, size_t i, const TensorRecord& b) {
    if (!siblings_filled) {
      siblings_filled = true;
      for (size_t kk = 0; kk < ranges.size(); ++kk) {
        const std::string& entry = target.entries[target.rows[static_cast<size_t>(rows[ranges[kk].first].target)].entry];
        const std::string_view m = module_of_parameters_grad(entry);
        if (m.empty()) continue;
        const std::string parent = parent_of(m);
        for (size_t r = ranges[kk].first; r < ranges[kk].second; ++r)
          if (const TensorRecord* rb = matched_bench(r))
            siblings[parent + "|" + std::string(rb->suffix(bench.entries))].push_back({kk, rms(*rb), &rb->shape});
      }
    }
    const auto it = siblings.find(parent_of(module) + "|" + std::string(b.suffix(bench.entries)));
    double best = 0;
    if (it != siblings.end())
      for (const Sibling& s : it->second)
        if (s.range != k && *s.shape == b.shape) best = std::max(best, s.rms);
    return best;
  };

  std::unordered_map<std::string, double> contribution;
  for (size_t k = 0; k < ranges.size(); ++k) {
    const auto* fwd = forward_range[k];
    if (fwd == nullptr) continue;
    const std::vector<const TensorRecord*> inputs = forward_inputs(*fwd);
    size_t j = 0;
    for (size_t i = ranges[k].first; i < ranges[k].second; ++i) {
      if (role(i) != Role::kOutput) continue;
      const size_t index = j++;
      const TensorRecord* b = matched_bench(i);
      if (b == nullptr || index >= inputs.size() || inputs[index] == nullptr || inputs[index]->shape != b->shape) continue;
      double& best = contribution[fingerprint(*inputs[index])];
      best = std::max(best, rms(*b));
    }
  }

  for (size_t k = 0; k < ranges.size(); ++k) {
    const auto [begin, end] = ranges[k];
    const std::string& name = target.entries[target.rows[static_cast<size_t>(rows[begin].target)].entry];
    if (const auto* fwd = forward_range[k]; fwd != nullptr && !contribution.empty()) {
      // The backward's input j is the gradient of the forward call's output j.
      std::vector<const TensorRecord*> outputs;
      for (size_t i = fwd->first; i < fwd->second; ++i)
        if (role(i) == Role::kOutput) outputs.push_back(matched_bench(i));
      size_t j = 0;
      for (size_t i = begin; i < end; ++i) {
        if (role(i) != Role::kInput || is_param(i)) continue;
        const size_t index = j++;
        const TensorRecord* b = matched_bench(i);
        if (b == nullptr || index >= outputs.size() || outputs[index] == nullptr || outputs[index]->shape != b->shape)
          continue;
        const auto it = contribution.find(fingerprint(*outputs[index]));
        if (it != contribution.end()) give(i, *b, it->second);
      }
    }
    if (!carried.empty())
      for (size_t i = begin; i < end; ++i) {
        const TensorRecord* b = matched_bench(i);
        if (b == nullptr || role(i) != Role::kInput) continue;
        const auto it = carried.find(both(i, *b));
        if (it != carried.end()) give(i, *b, it->second);
      }
    if (const auto* fwd = forward_range[k]) {
      const size_t f = static_cast<size_t>(fwd - ranges.data());
      const double in = peak_rms(f, Role::kInput), out = peak_rms(f, Role::kOutput);
      // The gradients' own RMS, not their expected one: only a cancellation
      // this call makes gives its outputs a scale. A call that passes a
      // residue on (a linear map of it) leaves a record its own size; its
      // error is then weighed against its inputs' errors at their own size
      // (find_first_divergence), and a fault it adds to a residue that
      // agrees exactly stays visible.
      double gradient_in = 0, gradient_numel = 0;
      for (size_t i = begin; i < end; ++i)
        if (const TensorRecord* b = matched_bench(i); b && role(i) == Role::kInput && !is_param(i) && rms(*b) > gradient_in)
          gradient_in = rms(*b), gradient_numel = numel(*b);
      const std::vector<const TensorRecord*> fwd_inputs = forward_inputs(*fwd);
      const double x = fwd_inputs.empty() || fwd_inputs[0] == nullptr ? 0.0 : rms(*fwd_inputs[0]);
      size_t j = 0;
      for (size_t i = begin; i < end; ++i) {
        if (role(i) != Role::kOutput) continue;
        const size_t index = j++;
        const TensorRecord* b = matched_bench(i);
        if (b == nullptr || gradient_in == 0) continue;
        const TensorRecord* input = index < fwd_inputs.size() ? fwd_inputs[index] : nullptr;
        if (index > 0 && input && input->shape == b->shape && !b->shape.empty() && numel(*b) < gradient_numel) {
          // A weight or bias taken as an input: its gradient sums over the
          // tokens, as a parameters_grad record does (below).
          const bool matrix = b->shape.size() >= 2;
          if (matrix && x == 0) continue;
          const double per = matrix ? static_cast<double>(b->shape[0]) : numel(*b);
          if (per <= 0) continue;
          give(i, *b, std::sqrt(std::max(gradient_numel / per, 1.0)) * gradient_in * (matrix ? x : 1.0));
        } else if (out > 0) {
          // The gain from this very input where it is known: at L1 and mix a
          // layer norm's weight (RMS ~1) is an input too, and the largest
          // input's RMS would hide the data's small one.
          const double from = input && input->shape == b->shape && rms(*input) > 0 ? rms(*input) : in;
          if (from > 0) give(i, *b, gradient_in * out / from);
        }
      }
      continue;
    }
    const std::string module(module_of_parameters_grad(name));
    if (module.empty()) continue;
    const auto* bwd = range_named(module + ".backward.0");
    const auto* fwd = range_named(module + ".forward.0");
    if (bwd == nullptr) {
      // A module whose parameters another call takes directly, never called
      // itself (WavLM's attention hands k_proj's weight and bias to
      // F.multi_head_attention_forward): no call to take a scale from. Its
      // siblings' gradients -- the same parameter of the other modules
      // under the same parent, of the same shape (q_proj's and v_proj's
      // bias) -- are sums over the same tokens of terms of the same kind; a
      // gradient far below theirs (k_proj's bias, zero in theory under a
      // softmax) is a residue of terms their size. A clean WavLM training
      // step had that bias gradient 43 % apart by its Sketch at 1e-7 of
      // q_proj's, and was named.
      for (size_t i = begin; i < end; ++i)
        if (const TensorRecord* b = matched_bench(i))
          if (const double want = sibling_scale(k, module, i, *b); want > 0) give(i, *b, want);
      continue;
    }
    double gradient = 0, gradient_numel = 0;
    for (size_t i = bwd->first; i < bwd->second; ++i) {
      const TensorRecord* b = matched_bench(i);
      if (b == nullptr || role(i) != Role::kInput) continue;
      const double g = std::max(rms(*b), expected[i]);
      if (g > gradient) gradient = g, gradient_numel = numel(*b);
    }
    const double x = fwd ? peak_rms(static_cast<size_t>(fwd - ranges.data()), Role::kInput) : 0.0;
    if (gradient == 0) continue;
    for (size_t i = begin; i < end; ++i) {
      const TensorRecord* b = matched_bench(i);
      if (b == nullptr || b->shape.empty()) continue;
      const bool matrix = b->shape.size() >= 2;
      if (matrix && x == 0) continue;
      const double per = matrix ? static_cast<double>(b->shape[0]) : numel(*b);
      if (per <= 0) continue;
      const double terms = gradient_numel / per;
      const double want = std::sqrt(std::max(terms, 1.0)) * gradient * (matrix ? x : 1.0);
      if (sum_condition && terms > 1 && rms(*b) > 0) {
        if (sum_condition->empty()) sum_condition->assign(rows.size(), 0.0);
        (*sum_condition)[i] = terms * want / rms(*b);
      }
      give(i, *b, want);
    }
  }
  return expected;
}

std::vector<bool> residue_gradient_parameters(const CompareResult& result, const std::vector<double>& expected) {
  const Dump& target = result.target;
  const auto& rows = result.rows;
  std::vector<bool> out(rows.size(), false);
  // "{module}|{name}" of every parameter gradient judged as a residue.
  std::unordered_map<std::string, bool> residue;
  for (size_t i = 0; i < rows.size() && i < expected.size(); ++i) {
    if (expected[i] <= 0 || rows[i].target < 0) continue;
    const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
    const std::string& entry = target.entries[t.entry];
    const std::string module(module_of_parameters_grad(entry));
    if (!module.empty()) residue.emplace(module + "|" + std::string(t.suffix(target.entries)), true);
  }
  if (residue.empty()) return out;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].target < 0) continue;
    const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
    const std::string_view suffix = t.suffix(target.entries);
    if (suffix.substr(0, 11) != "parameters.") continue;
    // "Module.x.Linear.forward.0" -> "Module.x.Linear".
    std::string_view entry = target.entries[t.entry];
    for (int k = 0; k < 2 && !entry.empty(); ++k) entry = entry.substr(0, entry.rfind('.') == std::string_view::npos ? 0 : entry.rfind('.'));
    out[i] = residue.count(std::string(entry) + "|" + std::string(suffix.substr(11))) > 0;
  }
  return out;
}

}  // namespace graphprobe::compare
