#pragma once
// What one comparison produces: the rows of the CSV and their verdicts.
// Plain data; the steps that fill it live in matching, verdicts and
// first_divergence. Torch-free.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compare/dump_reader.h"
#include "compare/metrics.h"
#include "compare/noise_floor.h"
#include "compare/rare_value.h"

namespace graphprobe::compare {

enum class MatchKind : uint8_t { kMatched, kTargetOnly, kBenchOnly };
// Ordered by severity: a row keeps the worst verdict any rule gives it.
enum class Verdict : uint8_t { kPass = 0, kWarning = 1, kError = 2, kUnmatched = 3 };
constexpr int kNumVerdicts = 4;

const char* match_name(MatchKind m);   // "matched", "unmatched-target", "unmatched-bench"
const char* verdict_name(Verdict v);   // "pass", "warning", "error", "unmatched"

// Defaults from the spec (percentages of NormRelativeErr).
struct Thresholds {
  double input_error_pct = 10.0;   // error rule: every input below this ...
  double output_error_pct = 50.0;  // ... and an output above this
  double warning_ratio = 10.0;     // warning rule: output > ratio x largest input
  double warning_pct = 10.0;       // ... or above this when the inputs' is 0
  // graphprobe's addition to msprobe's ratio rule: outputs at or below this
  // are rounding noise, whatever the ratio (fp32 kernels that fuse or reorder
  // differ by ~1e-6 relative, i.e. 1e-4 %, with inputs equal to ~1e-8 %).
  double noise_pct = 0.001;
  // Tensor mode (msprobe's real-data rules; cosines and ratios, not %):
  double cosine_input_min = 0.9;       // warning: every input Cosine > this ...
  double cosine_drop = 0.1;            // ... and an output's is lower than the lowest input's by more
  double thousandth_input_min = 0.9;   // error: every input One Thousandth Err Ratio > this ...
  double thousandth_output_max = 0.1;  // ... and an output's < this
  // graphprobe's first divergence (first_divergence.h), not msprobe's:
  double floor_scale = 1.0;        // multiplies every noise floor (noisier hardware: TF32, HF32)
  double divergence_ratio = 4.0;   // R: an output (or an input) beyond R x what explains it + its floor
};

// Every threshold by name: the one table the bindings, the Python API
// (graphprobe.compare.Thresholds) and the CLI read their defaults from
// (graphprobe._compare.threshold_defaults()), so a default is written only
// in the struct above.
struct ThresholdField {
  const char* name;
  double Thresholds::*member;
};
inline constexpr std::array<ThresholdField, 11> kThresholdFields{{
    {"input_error_pct", &Thresholds::input_error_pct},
    {"output_error_pct", &Thresholds::output_error_pct},
    {"warning_ratio", &Thresholds::warning_ratio},
    {"warning_pct", &Thresholds::warning_pct},
    {"noise_pct", &Thresholds::noise_pct},
    {"cosine_input_min", &Thresholds::cosine_input_min},
    {"cosine_drop", &Thresholds::cosine_drop},
    {"thousandth_input_min", &Thresholds::thousandth_input_min},
    {"thousandth_output_max", &Thresholds::thousandth_output_max},
    {"floor_scale", &Thresholds::floor_scale},
    {"divergence_ratio", &Thresholds::divergence_ratio},
}};

// How two tensor dumps are laid out and judged (csv_writer.h, docs/formats.md).
enum class TensorLayout : uint8_t {
  // msprobe's real-data CSV: its columns and order, its words in the metric
  // cells, its real-data rules (verdicts.h, RuleSet::kRealData).
  kMsprobe,
  // graphprobe's own: the statistics columns with the tensor columns
  // appended, the statistics rules plus tensor_verdicts.h.
  kStatisticsPlusTensor,
};

// A parameter after a training step that has not updated it yet (step 0):
// its value by the bench's Sketch, and how far apart the two sides'
// gradients of it are (relative L2, by their Sketch). The step after is
// judged with it (parameters_across_steps.h, first_update_beyond).
struct UpdateBasis {
  std::string key;  // parameter_key: "{module path}.{name}"
  std::array<double, 4> sketch{};
  double gradient_error = 0;
};

struct CompareOptions {
  bool fuzzy = false;  // match ignoring call indices, in order (see matching.h)
  Thresholds thresholds;
  // Off: Result is msprobe's verdict. On: graphprobe's additions also decide
  // it (unmatched rows get "unmatched"; the noise floor). See verdicts.h.
  bool graphprobe_verdicts = false;
  TensorLayout tensor_layout = TensorLayout::kMsprobe;
  // The training step the pair was recorded at (-1: not known). After the
  // first step a training run's parameters carry the earlier updates, which
  // clean runs leave apart (Adam moves an element whose gradient is rounding
  // by +-lr): at step 1, parameter rows of a dump that records a backward
  // pass explain their calls' outputs but are no cause of their own
  // (find_first_divergence), unless parameters_as_causes.
  int64_t step = -1;
  bool parameters_as_causes = false;
  // From step 2 on: the parameters (parameter_key: "{module path}.{name}")
  // that differed at the step before, or whose gradient did (the previous
  // pair's differing_parameters). Each carries that difference on: it
  // explains its calls' outputs and is no cause of its own; a parameter not
  // listed that differs was changed by something other than the update
  // (parameters_across_steps.h). The runner fills it when step N names a
  // parameter and step N-1 was compared too.
  std::vector<std::string> carried_parameters;
  // At step 1: the parameters as step 0 of the same process left them, from
  // that pair's CompareResult::parameter_basis. The runner fills it when
  // step 0 was compared too and found no divergence; the first update's
  // rule then judges each parameter's difference against what its
  // gradient's rounding at step 0 explains (parameters_across_steps.h).
  std::vector<UpdateBasis> update_basis;
};

// Real-data metrics of one matched row of two tensor dumps: msprobe's
// tensor-mode columns. Computed outside this torch-free engine (by
// graphprobe._C, which can read torch.save files) and stored here, so that
// verdicts, digests and the CSV see them. Definitions: tensor_metrics.h in
// csrc/compare_tensors and docs/formats.md.
enum TensorMetric : int {
  kCosine = 0,
  kEucDist = 1,
  kMaxAbsErr = 2,
  kMaxRelErr = 3,            // a ratio, not a percentage
  kOneThousandthRatio = 4,   // share of elements with relative error < 0.001
  kFiveThousandthsRatio = 5  // ... < 0.005
};
constexpr int kNumTensorMetrics = 6;
// Their names, in TensorMetric order, as msprobe's real-data CSV heads its
// columns (the graphprobe layout writes "Tensor MaxRelativeErr" for
// kMaxRelErr: csv_writer.cpp) and as the bindings document them.
inline constexpr std::array<const char*, kNumTensorMetrics> kTensorMetricNames{
    "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio"};

// The words msprobe's real-data CSV writes in a metric cell instead of a
// number (msprobe_real_data.h says when).
enum class CellWord : uint8_t { kNone, kUnsupported, kShapeUnmatched, kNotAvailable, kNan };

const char* word_name(CellWord w);  // "", "unsupported", "shape unmatched", "N/A", "Nan"
// The CellWord named `text`; throws std::invalid_argument naming the allowed words.
CellWord parse_word(const std::string& text);

enum class TensorStatus : uint8_t {
  kNone,         // not a tensor compare, or an unmatched row
  kComputed,     // values set: NaN where undefined, absent for empty tensors
  kMismatch,     // dtype or shape differ: no values; Result error
  kUnavailable,  // a tensor file is missing or unreadable: no values; Result warning
};

struct TensorMetrics {
  TensorStatus status = TensorStatus::kNone;
  std::array<OptDouble, kNumTensorMetrics> values;
  // msprobe's word for a cell without a number; kNone where values holds
  // the number. Only the msprobe layout sets these.
  std::array<CellWord, kNumTensorMetrics> words{};
  std::vector<std::string> notes;  // why values are NaN or missing; go to Err_message
};

struct CompareRow {
  int64_t target = -1;  // index into CompareResult::target.rows, -1 when absent
  int64_t bench = -1;   // index into CompareResult::bench.rows, -1 when absent
  // The one-byte fields side by side: a compare holds a row per tensor.
  MatchKind match = MatchKind::kMatched;
  Verdict verdict = Verdict::kPass;
  bool first_divergence = false;  // row of the first diverging entry
  // Matched rows: the largest scale-aware error over the statistics divided
  // by the dtype's noise floor (first_divergence.h); > 1 is beyond rounding
  // noise, inf for a hard difference (dtype, shape, a value, NaN/inf).
  // Absent for unmatched rows and rows without statistics.
  OptDouble z;
  Metrics metrics;
  // Why the verdict is what it is (Err_message); most rows have none. Rare
  // values: a row holds 8 bytes for each until it is set (rare_value.h).
  RareValue<std::vector<std::string>> reasons;
  // Tensor dumps only (set_tensor_metrics): unset in a statistics compare.
  RareValue<TensorMetrics> tensor;

  void raise(Verdict v, std::string reason) {
    if (v > verdict) verdict = v;
    reasons.mut().push_back(std::move(reason));
  }
};

// Classes of statistic: aggregate (Mean, Norm), extreme (Max, Min) and the
// Sketch (an estimate of the relative L2 error), each with a floor of its own
// (noise_floor.h).
enum StatClass : int { kAggregateClass = 0, kExtremeClass = 1, kSketchClass = 2 };
constexpr int kNumClasses = 3;
using ClassZ = std::array<double, kNumClasses>;  // z per StatClass

// The error of one matched row as the first-divergence rule measures it.
struct RowError {
  // Per statistic (Max, Min, Mean, Norm), relative and scale-aware:
  // |t - b| / max(|b|, RMS of the bench tensor) for Max, Min, Mean;
  // |t - b| / |b| for Norm. Absent where a side has no number.
  StatArray e;
  // The Sketch's: sqrt(mean over the four sums of (t - b)^2) / the bench's
  // Norm, an estimate of |t - b|_2 / |b|_2. Absent where a side has no Sketch.
  OptDouble e_sketch;
  double z = 0;         // max over statistics of e / floor; inf for a hard difference
  ClassZ z_class{0.0, 0.0, 0.0};  // the same max within each StatClass
  ClassZ e_class{0.0, 0.0, 0.0};  // the largest e within each StatClass (inf for a hard difference)
  // The statistic giving z (kStatMax .. kStatNorm, or kStatSketch); -1 when
  // z is 0 or hard.
  int worst_stat = -1;
  // The scale the errors were measured against when it exceeded the bench
  // tensor's own RMS (a cancellation: a record far smaller than what
  // produced it); 0 otherwise.
  double produced_from_rms = 0;
  // The floor of Mean, Norm and the Sketch where the bench tensor's Norm
  // rests on a few elements (first_divergence.cpp, few_elements_floor),
  // before floor_scale; 0 where the table's floors are higher.
  double few_elements = 0;
  double effective_elements = 0;  // the number of elements it assumed
  const NoiseFloor* floor = nullptr;  // the bench dtype's row of the table
  bool floor_assumed = false;         // a floating dtype the table does not name
  bool floor_from_upstream = false;   // measured against the coarser floor of the data upstream
  std::string hard;                   // why z is inf whatever the statistics ("dtype differs: ...")
};

// Bits of Divergence::kinds: why an entry is the first divergence.
enum DivergenceKind : uint8_t {
  kParameterCause = 1,    // a parameter differs beyond noise: nothing upstream produced it
  kOutputCause = 2,       // an output beyond R x its inputs' and parameters' error + its floor
  kUnrecordedInput = 4,   // an input beyond R x everything recorded before it + its floor
  kIntegerOutput = 8,     // with kOutputCause: an integer/bool output changed while the inputs agree within their floor
  kBitwisePair = 16,      // with another kind: below the floor, in a pair that agrees bit for bit so far (bitwise_pair.h)
  kSameValues = 32,       // with kOutputCause: an output the bench holds as an earlier output, bit for bit, changed on the target (same_values.h)
  kRandom = 64,           // with kOutputCause: the entry draws random numbers (dropout in training mode, sampling)
};

// The Sketch's index next to the four statistics (RowError::worst_stat).
constexpr int kStatSketch = kNumStats;

struct Divergence {
  uint32_t entry = 0;      // index into target.entries
  uint8_t kinds = 0;       // every DivergenceKind that holds
  size_t row = 0;          // index into rows of the row that triggered (parameter, else output, else input)
  RowError error;          // that row's error
  double z_inputs = 0;     // largest z over the entry's matched input rows (parameters not included)
  double z_parameters = 0; // ... over its parameter rows
  double z_outputs = 0;    // ... over its output rows
  // Kind kUnrecordedInput: the latest earlier entry with a matched row (the
  // last agreeing record), and the target entries after it without any.
  std::optional<uint32_t> last_agreeing;
  std::vector<uint32_t> unmatched_between;
  // Training drift: matched parameter rows of the pair, and how many have z > 1.
  int64_t parameter_rows = 0;
  int64_t parameter_rows_differing = 0;
  bool parameters_throughout = false;  // a parameter cause, and >= 50 % of them (at least 2) differ
  std::string message;                 // the one-line explanation compare prints
};

// The noise the pair shows where it agrees: over the matched rows of the
// entries before the first divergence, or over every matched row without one.
struct NoiseSeen {
  double max_e = 0;  // largest per-statistic error
  double max_z = 0;  // largest z
  int64_t rows = 0;  // matched rows looked at
  bool upstream = false;  // before a first divergence (else: every row)
};

// How much of each side the compare could pair (a side that recorded
// nothing, or far fewer records, is never a pass).
struct Coverage {
  int64_t target_entries = 0, bench_entries = 0;
  int64_t target_rows = 0, bench_rows = 0;
  int64_t matched_rows = 0;
  std::string problem;  // empty when fine: "target recorded nothing ...", "target is short ..."
};

struct CompareResult {
  Dump target;
  Dump bench;
  // Target rows in execution order, then bench-only rows in bench order.
  std::vector<CompareRow> rows;
  // Index into target.entries of the first diverging entry (= divergence->entry).
  std::optional<uint32_t> first_divergence;
  std::optional<Divergence> divergence;
  NoiseSeen noise;
  Coverage coverage;
  // The floors the matched floating rows used, one per table row seen, in
  // table order, already multiplied by floor_scale.
  std::vector<NoiseFloor> floors_used;
  double floor_scale = 1.0;
  // Per target entry: the coarsest floating floor of the data up to its
  // inputs (first_divergence.h); null before any floating data.
  std::vector<const NoiseFloor*> data_floors;
  // Per row (rows order): the RMS the row's errors are measured against when
  // it exceeds the bench tensor's own (first_divergence.h, "Cancellation");
  // 0 for the others. Empty before find_first_divergence.
  std::vector<double> produced_from_rms;
  // Per row: the parameter row an API input is the same tensor as
  // (parameter_inputs.h), judged by the parameter rules; -1 for the others.
  // Empty before find_first_divergence.
  std::vector<int64_t> parameter_of;
  // Per row: a tensor whose shape follows an integer record that changed
  // where rounding explains the change (a router's near tie: the tokens an
  // expert receives), explained by the first-divergence rule. Empty before
  // find_first_divergence.
  std::vector<bool> follows_flip;
  // Per row: a non-tensor argument that differs in a call whose outputs
  // are no further apart than rounding and their inputs explain (the two
  // programs call it differently to the same result), explained by the
  // first-divergence rule; and each such argument as "ENTRY NAME: TARGET vs
  // BENCH" for the summary. Empty before find_first_divergence.
  std::vector<bool> argument_without_effect;
  std::vector<std::string> arguments_without_effect;
  // From CompareOptions (above), and what find_first_divergence made of
  // them: whether parameters were judged as an earlier update's doing, and
  // how many parameter rows there are and differ beyond their floor on Max,
  // Min, Mean or Norm.
  int64_t step = -1;
  bool parameters_as_causes = false;
  bool parameters_after_update = false;
  int64_t parameter_rows = 0;
  int64_t parameter_rows_differing = 0;
  // CompareOptions::carried_parameters, sorted; of the parameter rows beyond
  // their floor, those judged as carried from the step before.
  std::vector<std::string> carried_parameters;
  int64_t parameter_rows_carried = 0;
  // The parameters whose parameter row or gradient record is beyond its
  // floor in this pair (parameters_across_steps.h): the next step's
  // carried_parameters.
  std::vector<std::string> differing_parameters;
  // CompareOptions::update_basis, sorted by key; what this pair offers the
  // next step's (parameter_basis: each parameter of a matched parameter row
  // and gradient record); and what the first update's rule made of them:
  // parameter rows it could judge, and those beyond what rounding explains.
  std::vector<UpdateBasis> update_basis;
  std::vector<UpdateBasis> parameter_basis;
  int64_t update_rows_judged = 0;
  int64_t update_rows_beyond = 0;
  // Rows per Result; the kUnmatched slot counts every row without a partner
  // (Match), which without graphprobe_verdicts also counts under its Result.
  std::array<int64_t, kNumVerdicts> counts{};
  // Of counts[kError]: cancellation residues (produced_from_rms > 0) whose
  // only reason is msprobe's relative-error rule (an output's
  // NormRelativeErr beyond --output-error-pct while every input's is below
  // --input-error-pct), in a pair where the first-divergence rule found
  // every row within rounding noise. A cancellation residue (a
  // gradient that is zero in theory: docs/formats.md) differs by tens of
  // percent of its own tiny size between two clean runs; msprobe's rule,
  // which keeps its Result column, calls that an error. --fail-on error
  // reports these rows and does not fail on them. So are the rows whose
  // only reason is a shape mismatch that follows a flip (follows_flip):
  // msprobe calls every changed shape an error; and the rows of that rule
  // alone whose entry's inputs moved beyond input_error_pct by their Sketch,
  // and the non-tensor arguments without effect (argument_without_effect).
  int64_t errors_within_noise = 0;
  // Both dumps are tensor dumps and the tensor rules have run: the CSV gets
  // the tensor-mode columns, laid out as tensor_layout says.
  bool tensor_mode = false;
  TensorLayout tensor_layout = TensorLayout::kMsprobe;
};

// Both sides hold tensor data: their records carry data_name.
bool has_tensor_data(const CompareResult& result);

}  // namespace graphprobe::compare
