#include "compare/comparison.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "compare/cell_text.h"
#include "compare/first_divergence.h"
#include "compare/matching.h"
#include "compare/tensor_verdicts.h"
#include "compare/verdicts.h"

namespace graphprobe::compare {
namespace {

void check(const Thresholds& t) {
  auto ok = [](double v) { return std::isfinite(v) && v >= 0; };
  if (!ok(t.input_error_pct) || !ok(t.output_error_pct) || !ok(t.warning_ratio) || !ok(t.warning_pct) ||
      !ok(t.noise_pct) || !ok(t.cosine_input_min) || !ok(t.cosine_drop) || !ok(t.thousandth_input_min) ||
      !ok(t.thousandth_output_max) || !ok(t.divergence_ratio))
    throw std::invalid_argument("graphprobe compare: thresholds must be finite and >= 0");
  if (!std::isfinite(t.floor_scale) || !(t.floor_scale > 0))
    throw std::invalid_argument("graphprobe compare: floor_scale must be a finite number > 0, got " +
                                format_number(t.floor_scale));
}

// Every reason is one of msprobe's relative-error rules (verdicts.cpp words
// them so): the error rule and the warning-ratio rule that comes with it.
bool relative_rule_only(const CompareRow& r) {
  constexpr std::string_view kError = "output NormRelativeErr ", kWarning = "largest output NormRelativeErr ";
  if (r.reasons->empty()) return false;
  for (const auto& why : *r.reasons) {
    const std::string_view w(why);
    if (w.substr(0, kError.size()) != kError && w.substr(0, kWarning.size()) != kWarning) return false;
  }
  return true;
}

bool shape_mismatch_only(const CompareRow& r) {
  constexpr std::string_view kShape = "shape mismatch: ";
  if (r.reasons->empty()) return false;
  for (const auto& why : *r.reasons)
    if (std::string_view(why).substr(0, kShape.size()) != kShape) return false;
  return true;
}

void tally(CompareResult& result, const Thresholds& th) {
  result.counts = {};
  result.errors_within_noise = 0;
  const bool within_noise = !result.divergence && result.coverage.problem.empty() && !result.tensor_mode;
  // msprobe's relative-error rule reads "inputs within --input-error-pct by
  // Norm" as "inputs unchanged". Where the inputs' Sketch says they moved by
  // more than that (a residue's bulk redistributed: a DistilBERT
  // sa_layer_norm's incoming gradient 3 % apart by Norm, 39 % by Sketch),
  // an output far apart is no error of the call's own. Per entry, the
  // largest Sketch error of its inputs, measured only where needed.
  std::unordered_map<uint32_t, double> input_sketch;
  bool measured = false;
  auto inputs_moved = [&](uint32_t entry) {
    if (!measured) {
      measured = true;
      for (size_t j = 0; j < result.rows.size(); ++j) {
        const CompareRow& q = result.rows[j];
        if (q.match != MatchKind::kMatched || !q.z || q.target < 0) continue;
        const TensorRecord& t = result.target.rows[static_cast<size_t>(q.target)];
        const TensorRecord& b = result.bench.rows[static_cast<size_t>(q.bench)];
        if (t.role != Role::kInput || t.sketch < 0 || b.sketch < 0) continue;
        // At the input's own size (msprobe's NormRelativeErr is), not
        // against a scale it was cancelled from.
        const RowError e = row_error(t, b, 1.0, nullptr, &result.target.sketches[static_cast<size_t>(t.sketch)],
                                     &result.bench.sketches[static_cast<size_t>(b.sketch)], 0.0);
        double& best = input_sketch[t.entry];
        if (e.e_sketch) best = std::max(best, *e.e_sketch);
      }
    }
    const auto it = input_sketch.find(entry);
    return it != input_sketch.end() && it->second * 100.0 >= th.input_error_pct;
  };
  for (size_t i = 0; i < result.rows.size(); ++i) {
    const CompareRow& r = result.rows[i];
    ++result.counts[static_cast<size_t>(r.verdict)];
    if (r.match != MatchKind::kMatched && r.verdict != Verdict::kUnmatched)
      ++result.counts[static_cast<size_t>(Verdict::kUnmatched)];
    // A cancellation residue (measured against the scale it was cancelled
    // from): what msprobe's rule reads as an error is its rounding.
    const bool residue = i < result.produced_from_rms.size() && result.produced_from_rms[i] > 0;
    const bool follows_flip = i < result.follows_flip.size() && result.follows_flip[i];
    if (!(within_noise && r.verdict == Verdict::kError && r.match == MatchKind::kMatched && r.z)) continue;
    const uint32_t entry = result.target.rows[static_cast<size_t>(r.target)].entry;
    const bool without_effect = i < result.argument_without_effect.size() && result.argument_without_effect[i];
    if ((relative_rule_only(r) && (residue || inputs_moved(entry))) || (follows_flip && shape_mismatch_only(r)) ||
        without_effect)
      ++result.errors_within_noise;
  }
}

}  // namespace

CompareResult compare_dumps(Dump target, Dump bench, const CompareOptions& options) {
  check(options.thresholds);
  CompareResult result;
  result.target = std::move(target);
  result.bench = std::move(bench);
  result.rows = match_rows(result.target, result.bench, options.fuzzy, &result.target.notes);
  result.step = options.step;
  result.parameters_as_causes = options.parameters_as_causes;
  result.carried_parameters = options.carried_parameters;
  std::sort(result.carried_parameters.begin(), result.carried_parameters.end());
  result.update_basis = options.update_basis;
  std::sort(result.update_basis.begin(), result.update_basis.end(),
            [](const UpdateBasis& a, const UpdateBasis& b) { return a.key < b.key; });
  apply_verdicts(result.target, result.bench, result.rows, options.thresholds, options.graphprobe_verdicts);
  measure_coverage(result);
  find_first_divergence(result, options.thresholds);
  tally(result, options.thresholds);
  return result;
}

void finish_tensor_compare(CompareResult& result, const CompareOptions& options) {
  check(options.thresholds);
  if (result.tensor_mode) throw std::logic_error("graphprobe compare: finish_tensor_compare called twice");
  result.tensor_mode = true;
  result.tensor_layout = options.tensor_layout;
  if (options.tensor_layout == TensorLayout::kMsprobe) {
    // msprobe judges tensor dumps by its real-data checkers alone: start over.
    for (CompareRow& r : result.rows) {
      r.verdict = Verdict::kPass;
      r.reasons = {};
    }
    apply_verdicts(result.target, result.bench, result.rows, options.thresholds, options.graphprobe_verdicts,
                   RuleSet::kRealData);
    // A row without metrics whose status says error (a tensor file that
    // exists but cannot be read) was not compared: never msprobe's pass.
    for (CompareRow& r : result.rows)
      for (const auto& n : r.tensor->notes)
        r.raise(r.tensor->status == TensorStatus::kMismatch ? Verdict::kError : Verdict::kPass, n);
  } else {
    apply_tensor_verdicts(result.target, result.rows, options.thresholds);
  }
  find_first_divergence(result, options.thresholds);
  tally(result, options.thresholds);
}

CompareResult compare_files(const std::string& target_path, const std::string& bench_path,
                            const CompareOptions& options) {
  check(options.thresholds);  // before reading: a usage error should not wait for a large file
  return compare_dumps(read_dump(target_path), read_dump(bench_path), options);
}

}  // namespace graphprobe::compare
