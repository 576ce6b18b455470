#include "compare/verdicts.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compare/cell_text.h"
#include "compare/entry_ranges.h"
#include "compare/msprobe_values.h"

namespace graphprobe::compare {
namespace {

std::string pct(double v) { return format_number(v) + "%"; }

// msprobe decides a row's side from its name, not from the part it came from.
bool is_output(const TensorRecord& r) { return r.name.find(".output.") != std::string::npos; }

enum class Ignore : uint8_t { kNone, kInputs, kAll };

// msprobe's get_api_ignore_info: the second name component of the entry's
// first input row.
Ignore ignore_of(std::string_view first_input) {
  const size_t a = first_input.find('.');
  if (a == std::string_view::npos) return Ignore::kNone;
  const size_t b = first_input.find('.', a + 1);
  const std::string_view api = first_input.substr(a + 1, b == std::string_view::npos ? std::string_view::npos : b - a - 1);
  for (const char* n : {"empty", "empty_like", "numpy", "to", "__setitem__", "empty_with_format", "new_empty_strided",
                        "new_empty", "empty_strided"})
    if (api == n) return Ignore::kAll;
  for (const char* n : {"_reduce_scatter_base", "_all_gather_base", "all_to_all_single", "batch_isend_irecv"})
    if (api == n) return Ignore::kInputs;
  return Ignore::kNone;
}

// A NormRelativeErr as msprobe's get_min_or_max_value reads it: only "x%"
// cells count ("0", "inf", "Nan", "N/A" and "Diff" are skipped).
std::optional<double> percentage(const CompareRow& r) {
  if (r.match != MatchKind::kMatched || r.metrics.kind[kStatNorm] != StatDiff::kNumbers) return std::nullopt;
  return *r.metrics.rel_pct[kStatNorm];
}

// A NormRelativeErr as msprobe's str2float reads it for the error rule:
// "inf" counts as infinite, "N/A" and "Diff" as 0.
double as_fraction(const CompareRow& r) {
  if (r.match != MatchKind::kMatched) return 0;
  switch (r.metrics.kind[kStatNorm]) {
    case StatDiff::kNumbers:
    case StatDiff::kBenchZero:
    case StatDiff::kInf:
    case StatDiff::kNegInf:
    case StatDiff::kNan: return std::fabs(*r.metrics.rel_pct[kStatNorm]) / 100;
    default: return 0;
  }
}

// Judges one entry at a time; the index lists are reused across entries.
class EntryJudge {
 public:
  EntryJudge(const Dump& target, const Dump& bench, std::vector<CompareRow>& rows, const Thresholds& th,
             bool graphprobe, RuleSet rules)
      : target_(target), bench_(bench), rows_(rows), th_(th), graphprobe_(graphprobe), rules_(rules) {}

  void run(size_t begin, size_t end) {
    inputs_.clear();
    outputs_.clear();
    for (size_t i = begin; i < end; ++i) (is_output(t(i)) ? outputs_ : inputs_).push_back(i);
    const Ignore ignore = inputs_.empty() ? Ignore::kNone : ignore_of(t(inputs_.front()).name);
    if (ignore == Ignore::kAll) return;
    auto each_checked = [&](auto&& f) {
      if (ignore == Ignore::kInputs) {
        for (size_t i : outputs_) f(i);
      } else {
        for (size_t i = begin; i < end; ++i) f(i);
      }
    };
    each_checked([this](size_t i) { inf_nan(i); });
    each_checked([this](size_t i) { differences(i); });
    if (ignore == Ignore::kNone) {
      for (size_t i : inputs_) scalar_value(i);
      if (rules_ == RuleSet::kStatistics) relative_errors();
      else real_data_rules();
    }
  }

 private:
  const TensorRecord& t(size_t i) const { return target_.rows[static_cast<size_t>(rows_[i].target)]; }
  const TensorRecord& b(size_t i) const { return bench_.rows[static_cast<size_t>(rows_[i].bench)]; }
  bool matched(size_t i) const { return rows_[i].match == MatchKind::kMatched; }

  void inf_nan(size_t i) {
    if (matched(i) && (is_inf_or_nan(b(i), kStatMax) || is_inf_or_nan(b(i), kStatMin))) return;
    for (int s : {kStatMax, kStatMin})
      if (is_inf_or_nan(t(i), s)) {
        rows_[i].raise(Verdict::kError, std::string("target ") + (s == kStatMax ? "Max" : "Min") + " is " +
                                            stat_str(t(i), s) + " while the bench's Max and Min are not NaN/inf");
        return;
      }
  }

  void differences(size_t i) {
    if (!matched(i)) return;
    const TensorRecord &tr = t(i), &br = b(i);
    auto flag = [](const std::optional<bool>& v) { return v ? (*v ? "True" : "False") : "N/A"; };
    if (tr.requires_grad != br.requires_grad)
      rows_[i].raise(Verdict::kError, std::string("requires_grad mismatch: ") + flag(tr.requires_grad) + " vs " +
                                          flag(br.requires_grad));
    // msprobe leaves fused weights (qkv, gate_up) out of the dtype test.
    if (tr.dtype != br.dtype && br.name.find("qkv") == std::string::npos && br.name.find("gate_up") == std::string::npos)
      rows_[i].raise(Verdict::kError, "dtype mismatch: " + tr.dtype + " vs " + br.dtype);
    if (!same_shape(tr, br))
      rows_[i].raise(Verdict::kError, "shape mismatch: " + shape_of(tr) + " vs " + shape_of(br));
  }

  // ParametersErrChecker: a non-tensor input (dtype "<class ...>", shape [])
  // whose value differs.
  void scalar_value(size_t i) {
    if (!matched(i)) return;
    const TensorRecord &tr = t(i), &br = b(i);
    if (tr.dtype.find("class") == std::string::npos || br.dtype.find("class") == std::string::npos) return;
    if (!shape_is_scalar(tr) || python_equal(tr, br, kStatMax)) return;
    rows_[i].raise(Verdict::kError, "non-tensor argument differs: " + stat_str(tr, kStatMax) + " vs " + stat_str(br, kStatMax));
  }

  void relative_errors() {
    double in_max = 0, out_max = 0;
    for (size_t i : inputs_)
      if (auto p = percentage(rows_[i])) in_max = std::max(in_max, *p / 100);
    for (size_t i : outputs_)
      if (auto p = percentage(rows_[i])) out_max = std::max(out_max, *p / 100);
    // Thresholds compared as fractions, as msprobe does, so that a value on
    // the boundary is judged the same way.
    if (in_max < th_.input_error_pct / 100) {
      for (size_t i : outputs_) {
        const double v = as_fraction(rows_[i]);
        if (v > th_.output_error_pct / 100)
          rows_[i].raise(Verdict::kError, "output NormRelativeErr " + rel_cell(rows_[i].metrics, kStatNorm) + " > " +
                                              pct(th_.output_error_pct) + " while every input's is < " +
                                              pct(th_.input_error_pct));
      }
    }
    if (outputs_.empty()) return;
    if (graphprobe_ && out_max * 100 <= th_.noise_pct) return;
    CompareRow& first = rows_[outputs_.front()];
    if (in_max == 0) {
      if (out_max > th_.warning_pct / 100)
        first.raise(Verdict::kWarning, "largest output NormRelativeErr " + pct(out_max * 100) + " > " +
                                           pct(th_.warning_pct) + " while the inputs' is 0");
    } else if (out_max / in_max > th_.warning_ratio) {
      first.raise(Verdict::kWarning, "largest output NormRelativeErr " + pct(out_max * 100) + " > " +
                                         format_number(th_.warning_ratio) + "x the largest input's (" +
                                         pct(in_max * 100) + ")");
    }
  }

  // msprobe's get_min_or_max_value(is_min=True) over a tensor metric.
  double lowest(const std::vector<size_t>& rows, TensorMetric m) const {
    double v = 1.0;
    for (size_t i : rows)
      if (const auto& c = rows_[i].tensor->values[m]; c && !std::isnan(*c)) v = std::min(v, *c);
    return v;
  }

  // OneThousandthErrChecker and CosineWarnChecker.
  void real_data_rules() {
    if (outputs_.empty()) return;
    CompareRow& first = rows_[outputs_.front()];
    const double in_ratio = lowest(inputs_, kOneThousandthRatio), out_ratio = lowest(outputs_, kOneThousandthRatio);
    if (in_ratio > th_.thousandth_input_min && out_ratio < th_.thousandth_output_max)
      first.raise(Verdict::kError, "lowest output One Thousandth Err Ratio " + format_number(out_ratio) + " < " +
                                       format_number(th_.thousandth_output_max) + " while the inputs' is " +
                                       format_number(in_ratio) + " > " + format_number(th_.thousandth_input_min));
    const double in_cos = lowest(inputs_, kCosine), out_cos = lowest(outputs_, kCosine);
    if (in_cos > th_.cosine_input_min && in_cos - out_cos > th_.cosine_drop)
      first.raise(Verdict::kWarning, "lowest output Cosine " + format_number(out_cos) + " is more than " +
                                         format_number(th_.cosine_drop) + " below the inputs' (" +
                                         format_number(in_cos) + " > " + format_number(th_.cosine_input_min) + ")");
  }

  const Dump& target_;
  const Dump& bench_;
  std::vector<CompareRow>& rows_;
  const Thresholds& th_;
  bool graphprobe_;
  RuleSet rules_;
  std::vector<size_t> inputs_, outputs_;
};

}  // namespace

void apply_verdicts(const Dump& target, const Dump& bench, std::vector<CompareRow>& rows, const Thresholds& th,
                    bool graphprobe_verdicts, RuleSet rules) {
  for (CompareRow& r : rows) {
    if (r.match == MatchKind::kMatched) continue;
    const char* why = r.match == MatchKind::kTargetOnly ? "no matching bench row" : "no matching target row";
    // msprobe reports such rows with their own Result (pass unless a rule
    // below fires); graphprobe's verdicts give them their own.
    r.raise(graphprobe_verdicts ? Verdict::kUnmatched : Verdict::kPass, why);
  }
  EntryJudge judge(target, bench, rows, th, graphprobe_verdicts, rules);
  for (const auto& [begin, end] : entry_ranges(target, rows)) judge.run(begin, end);
}

}  // namespace graphprobe::compare
