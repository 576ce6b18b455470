#include "compare/first_divergence.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compare/bitwise_pair.h"
#include "compare/cancellation.h"
#include "compare/cell_text.h"
#include "compare/entry_ranges.h"
#include "compare/forward_of.h"
#include "compare/module_entry_name.h"
#include "compare/msprobe_values.h"
#include "compare/parameter_inputs.h"
#include "compare/parameters_across_steps.h"
#include "compare/running_statistics.h"
#include "compare/same_values.h"

namespace graphprobe::compare {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The four statistics, then the Sketch (kStatSketch).
constexpr int kNumJudged = kNumStats + 1;
constexpr const char* kStatNames[kNumJudged] = {"Max", "Min", "Mean", "Norm", "Sketch"};
constexpr std::array<int, kNumClasses> kClasses = {kAggregateClass, kExtremeClass, kSketchClass};
// R for the Sketch class is this multiple of --divergence-ratio: a relative
// L2 error grows through an operation by its condition number (a softmax
// over logits of size 10 multiplies it by ~10), while Mean and Norm barely
// move; faults are 100x or more above the inputs' noise in this column.
constexpr double kSketchRatioFactor = 4.0;
// Cancellation (docs/formats.md): a record is judged against the RMS it is
// expected to have from what produced it when that exceeds its own by more
// than this margin (backward gains differ from forward gains by about
// sqrt(fan_out / fan_in); 8 leaves room for that).
constexpr double kExpectedMargin = 8.0;

// The largest relative error of an entry's inputs and parameters under which
// a changed integer/bool output is the entry's own doing (see
// inputs_within_floor): float32 rounding.
constexpr double kIntegerFlipInputs = 1e-6;

bool is_extreme(int s) { return s == kStatMax || s == kStatMin; }

using Sketch = std::array<double, 4>;

const Sketch* sketch_of(const Dump& d, const TensorRecord& r) {
  return r.sketch >= 0 && static_cast<size_t>(r.sketch) < d.sketches.size() ? &d.sketches[static_cast<size_t>(r.sketch)]
                                                                               : nullptr;
}

// A statistic as a number for the error: NaN and the infinities included;
// nullopt for None, text, booleans and devices (compared by their print).
std::optional<double> numeric(const TensorRecord& r, int s) {
  double v = 0;
  switch (classify(r, s, &v)) {
    case ValClass::kNum: return v;
    case ValClass::kNan: return std::numeric_limits<double>::quiet_NaN();
    case ValClass::kInf: return kInf;
    case ValClass::kNegInf: return -kInf;
    default: return std::nullopt;
  }
}

// |t - b| / scale, with the rules for NaN and infinities of the design:
// both NaN -> 0, one NaN -> inf, equal infinities -> 0, any other infinity
// -> inf; a zero scale -> 0 when equal, else inf.
double scaled_error(double t, double b, double scale) {
  if (std::isnan(t) || std::isnan(b)) return std::isnan(t) && std::isnan(b) ? 0 : kInf;
  if (std::isinf(t) || std::isinf(b)) return t == b ? 0 : kInf;
  if (t == b) return 0;
  if (!(scale > 0)) return kInf;
  return std::fabs(t - b) / scale;
}

// Number of elements of the bench tensor, or -1 when its shape is not a
// plain list of sizes (null placeholders, slices).
double numel(const TensorRecord& r) {
  if (!r.shape_text.empty()) return -1;
  double n = 1;
  for (int64_t d : r.shape) n *= static_cast<double>(d);
  return n;
}

// The ulp of the accumulator a sum of records of this dtype is taken in:
// the dtype's own (the table's element column) where it is float32's or
// finer, float32's for every narrower floating dtype (CPU and GPU kernels
// accumulate those in float32 or wider).
double accumulator_ulp(std::string_view dtype) {
  return std::min(noise_floor_for(dtype, true).element, noise_floor_for("torch.float32", true).element);
}

// The RMS of the bench tensor (Norm / sqrt(numel)); 0 when unknown.
double bench_rms(const TensorRecord& b) {
  const double n = numel(b);
  const auto norm = numeric(b, kStatNorm);
  return norm && std::isfinite(*norm) && n > 0 ? std::fabs(*norm) / std::sqrt(n) : 0.0;
}

// "output.0" -> "output 0"; "parameters.weight" -> "parameter `weight`".
std::string row_label(const TensorRecord& r, const std::vector<std::string>& entries) {
  std::string s(r.suffix(entries));
  if (s.rfind("parameters.", 0) == 0) return "parameter `" + s.substr(11) + "`";
  const size_t dot = s.find('.');
  if (dot != std::string::npos) s[dot] = ' ';
  return s;
}

std::string percent(double e) { return short_number(e * 100) + " %"; }

// "1000x": ratios shown without an exponent below a million.
std::string times(double v) {
  if (std::isinf(v)) return "infinitely many times";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", v);
  const double rounded = std::strtod(buf, nullptr);
  if (rounded >= 100 && rounded < 1e6) std::snprintf(buf, sizeof buf, "%.0f", rounded);
  else return short_number(v) + "x";
  return std::string(buf) + "x";
}

int stat_class(int s) {
  if (s == kStatSketch) return kSketchClass;
  return is_extreme(s) ? kExtremeClass : kAggregateClass;
}

double class_floor(const NoiseFloor& f, int cls) {
  return cls == kSketchClass ? f.sketch : cls == kExtremeClass ? f.extreme : f.aggregate;
}

// The floor of Mean, Norm and the Sketch of a tensor whose Norm rests on a
// few elements: with every element off by up to an ulp (delta) in a random
// direction, the Norm moves by at most delta * max|x| / Norm, i.e. delta over
// the square root of n = Norm^2 / max|x|^2 elements of the largest size, and
// the relative L2 error of those few elements is delta itself. A [8, 1]
// router gate in bfloat16 (Norm 0.3 % apart from inputs 2e-4 apart) was
// named, clean, against the table's 2e-3 made for averages over many
// elements. Large tensors keep the table's floors (n > 15 in bfloat16);
// float32's ulp stays below its floors at every size. Sets *elements to n
// where the result exceeds the table's floors.
double few_elements_floor(const NoiseFloor& f, const TensorRecord& b, double* elements = nullptr) {
  if (!(f.element > 0)) return 0.0;
  const auto norm = numeric(b, kStatNorm), mx = numeric(b, kStatMax), mn = numeric(b, kStatMin);
  if (!norm || !mx || !mn) return 0.0;
  const double largest = std::max(std::fabs(*mx), std::fabs(*mn));
  if (!(largest > 0) || !std::isfinite(largest) || !std::isfinite(*norm)) return 0.0;
  double n = (*norm / largest) * (*norm / largest);
  const double all = numel(b);
  if (all > 0) n = std::min(n, all);
  n = std::max(n, 1.0);
  const double floor = f.element / std::sqrt(n);
  if (floor <= std::min(f.aggregate, f.sketch)) return 0.0;
  if (elements) *elements = n;
  return floor;
}

double sized_class_floor(const NoiseFloor& f, int cls, double few) {
  const double base = class_floor(f, cls);
  return cls == kExtremeClass ? base : std::max(base, few);
}

double floor_of(const RowError& e, int s, double floor_scale) {
  return sized_class_floor(*e.floor, stat_class(s), e.few_elements) * floor_scale;
}

const OptDouble& judged(const RowError& e, int s) { return s == kStatSketch ? e.e_sketch : e.e[s]; }

// The statistic of class cls with the largest z (the first on a tie); -1 when none differs.
int worst_in_class(const RowError& e, int cls, double floor_scale) {
  int best = -1;
  double best_z = 0;
  for (int s = 0; s < kNumJudged; ++s) {
    if (stat_class(s) != cls || !judged(e, s)) continue;
    const double f = floor_of(e, s, floor_scale);
    const double z = f > 0 ? *judged(e, s) / f : (*judged(e, s) > 0 ? kInf : 0);
    if (z > best_z) best = s, best_z = z;
  }
  return best;
}

// "Norm 0.1 %, 10x the float32 floor 1e-4" for the worst statistic of class
// cls, or the hard reason.
std::string error_text(const RowError& e, int cls, double floor_scale) {
  if (!e.hard.empty()) return e.hard;
  const int s = worst_in_class(e, cls, floor_scale);
  if (s < 0) return "no difference";
  const double floor = floor_of(e, s, floor_scale);
  std::string out = std::string(kStatNames[s]) + " " + percent(*judged(e, s)) +
                    (e.produced_from_rms > 0 ? " of the scale of what produced it" : "") + ", ";
  if (floor == 0) return out + "any difference counts for " + e.floor->name + " values";
  const double z = *judged(e, s) / floor;
  out += times(z) + " the " + std::string(e.floor->name) + (e.floor_assumed ? " (assumed)" : "") + " floor " +
         short_number(floor) + (e.floor_from_upstream ? " (of the data upstream)" : "");
  if (stat_class(s) != kExtremeClass && e.few_elements > class_floor(*e.floor, stat_class(s)))
    out += " for a Norm resting on ~" + short_number(e.effective_elements) + " elements";
  return out;
}

// How far a parameter row is beyond noise as a cause: over Max, Min, Mean
// and Norm, not the Sketch. After an optimizer step eager's and compiled
// parameters differ by drift: Adam moves every element by ~lr whatever its
// gradient's size, so an element whose gradient is zero to rounding moves
// by +lr on one side and -lr on the other -- a few elements, which the
// Sketch sees and the four statistics do not. A parameter's Sketch still
// explains its module's outputs and adds to what is upstream.
double cause_z(const ClassZ& z) { return std::max(z[kAggregateClass], z[kExtremeClass]); }

// Marks an API entry among the walked ranges (module paths are never "*").
constexpr std::string_view kApiCall = "*";

// An API entry's function: "Tensor.clamp_.0.backward" -> "clamp_"; empty
// for a name without one.
std::string_view api_of(std::string_view name) {
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos) return {};
  const std::string_view api = name.substr(dot + 1);
  return api.substr(0, api.find('.'));
}

// Whether an entry computes a function whose derivative jumps (ReLU and
// its kin, clamp, max pooling): in its backward, an input element within
// rounding of the jump (x near 0 for a ReLU, a near tie in a pooling
// window) takes another branch on the other side and moves that element's
// gradient by its whole size, so its gradients follow their forward
// inputs' rounding as a flipped argmax does (a clean bfloat16 OPT under
// inductor: a ReLU's input gradient 5.9 % apart, from inputs 0.25 % apart).
bool piecewise(std::string_view name) {
  const ModuleEntryName m = split_module_entry(name);
  if (!m.class_name.empty()) {
    for (std::string_view c : {"ReLU", "ReLU6", "LeakyReLU", "Hardtanh", "Threshold", "Hardswish", "Hardsigmoid",
                               "MaxPool1d", "MaxPool2d", "MaxPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
                               "AdaptiveMaxPool3d"})
      if (m.class_name == c) return true;
    return false;
  }
  // API entries: "Functional.relu.3.backward", "Tensor.clamp_.0.backward".
  std::string_view api = api_of(name);
  if (!api.empty() && api.back() == '_') api.remove_suffix(1);  // in place
  // maximum/minimum and their kin route each element's gradient to the
  // larger (smaller) input: a near tie flips it (RWKV's running maximum of
  // its time mixing, a clean bfloat16 step 1: an input gradient's Min 59x
  // apart from forward inputs 0.1 % apart).
  for (std::string_view f : {"relu", "relu6", "leaky_relu", "hardtanh", "threshold", "hardswish", "hardsigmoid",
                             "clamp", "clip", "clamp_min", "clamp_max", "max_pool1d", "max_pool2d", "max_pool3d",
                             "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "maximum",
                             "minimum", "fmax", "fmin", "max", "min", "amax", "amin"})
    if (api == f) return true;
  return false;
}

// Whether an entry draws random numbers (for a backward entry: whether its
// forward did): dropout and its kin in training
// mode (in eval mode they pass their input on and never diverge), stochastic
// depth, RReLU, sampling. Eager code and inductor's code draw from different
// streams unless torch._inductor.config.fallback_random is set: a clean
// eager-vs-inductor training step with dropout on differs from its first
// dropout on (a Linear, nn.Dropout(0.1), a Linear: the dropout's output 51 %
// apart by its Sketch, its inputs equal), which is no fault of the compute.
bool draws_random(std::string_view name) {
  const ModuleEntryName m = split_module_entry(name);
  if (!m.class_name.empty())
    return m.class_name.find("Dropout") != std::string_view::npos ||
           m.class_name.find("DropPath") != std::string_view::npos || m.class_name == "RReLU";
  std::string_view api = api_of(name);
  if (!api.empty() && api.back() == '_') api.remove_suffix(1);  // in place: Tensor.bernoulli_
  for (std::string_view f : {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
                             "feature_dropout", "native_dropout", "rrelu", "gumbel_softmax", "bernoulli", "rand",
                             "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "multinomial",
                             "normal", "poisson", "uniform", "random", "exponential", "geometric", "cauchy",
                             "log_normal"})
    if (api == f) return true;
  return false;
}

// An elementwise sum or difference (Tensor.__add__, Tensor.__sub__, their
// reflected and in-place forms, torch.add/sub): each output element's error
// is at most the sum of its terms' errors, whatever their cancellation.
bool elementwise_sum(std::string_view name) {
  if (name.substr(0, 7) == "Module.") return false;
  const std::string_view api = api_of(name);
  for (std::string_view f : {"__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "add", "add_",
                             "sub", "sub_", "subtract", "subtract_"})
    if (api == f) return true;
  return false;
}

// A map whose outputs' errors its inputs' relative L2 errors bound
// (docs/formats.md, "Products, convolutions and sums"): a product of two
// tensors (torch.matmul, @, bmm, mm), |d(AB)| <= |dA| |B| + |A| |dB| in L2
// whatever the shapes and broadcasting (Cauchy-Schwarz per output element,
// summed); a convolution of x with weights of k taps, |d conv| <= sqrt(k)
// (|dx| M_w + |dw| |x|), M_w the largest Frobenius norm of one filter (each
// input element meets at most k taps of it); a sum or mean of one tensor
// over m elements an output, |d sum| <= sqrt(m) |dx|.
enum class BoundedMap { kNone, kProduct, kConvolution, kSum, kMean };
BoundedMap bounded_map(std::string_view name) {
  if (name.substr(0, 7) == "Module.") return BoundedMap::kNone;
  const std::string_view api = api_of(name);
  for (std::string_view f : {"matmul", "__matmul__", "__rmatmul__", "__imatmul__", "bmm", "mm"})
    if (api == f) return BoundedMap::kProduct;
  if (api == "conv1d" || api == "conv2d" || api == "conv3d") return BoundedMap::kConvolution;
  if (api == "sum" || api == "nansum") return BoundedMap::kSum;
  if (api == "mean" || api == "nanmean") return BoundedMap::kMean;
  return BoundedMap::kNone;
}

// The norms of a factor X of a product C = A @ B (map_bound): `whole`,
// its Norm (0 when unknown); `matrix`, a bound on the Frobenius norm of any
// one matrix of it, min(Norm, sqrt(rows x columns) x max |element|);
// `batched`, whether X has as many matrices as C, i.e. the other factor is
// not broadcast over X's batch (then sum_b |dX_b Y_b|^2 <= |dX|^2 max_b
// |Y_b|^2; otherwise each dX_b meets several Y_b and only |Y| bounds them).
struct ProductNorms {
  double whole = 0, matrix = 0;
  bool batched = false;
};
ProductNorms product_factor_norm(const TensorRecord& x, const TensorRecord& c) {
  ProductNorms p;
  const auto norm = numeric(x, kStatNorm);
  if (!norm || !std::isfinite(*norm)) return p;
  p.whole = p.matrix = std::fabs(*norm);
  const auto mx = numeric(x, kStatMax), mn = numeric(x, kStatMin);
  if (!x.shape_text.empty() || !c.shape_text.empty() || !mx || !mn) return p;
  auto matrices = [](const Shape& shape) {
    double n = 1;
    for (size_t d = 0; d + 2 < shape.size(); ++d) n *= static_cast<double>(shape[d]);
    return n;
  };
  double cells = 1;
  for (size_t d = x.shape.size() >= 2 ? x.shape.size() - 2 : 0; d < x.shape.size(); ++d)
    cells *= static_cast<double>(x.shape[d]);
  const double largest = std::max(std::fabs(*mx), std::fabs(*mn));
  if (std::isfinite(largest)) p.matrix = std::min(p.whole, std::sqrt(cells) * largest);
  p.batched = matrices(x.shape) == matrices(c.shape);
  return p;
}

// A call that normalizes each row (or channel) of its input by that row's
// own scale: LayerNorm, RMSNorm, GroupNorm, BatchNorm and their functional
// forms. A row far smaller than the others is blown up to the size of the
// rest, and its relative error with it (docs/formats.md, "Rows scaled to
// one size").
bool normalizes_rows(std::string_view name) {
  const ModuleEntryName m = split_module_entry(name);
  if (!m.class_name.empty()) {
    const std::string_view c = m.class_name;
    constexpr std::string_view kNorm = "Norm";
    // LayerNorm, RMSNorm, LlamaRMSNorm, T5LayerNorm, GroupNorm, BatchNorm2d
    for (size_t at = c.find(kNorm); at != std::string_view::npos; at = c.find(kNorm, at + 1)) {
      const std::string_view rest = c.substr(at + kNorm.size());
      if (rest.empty() || rest == "1d" || rest == "2d" || rest == "3d") return true;
    }
    return false;
  }
  const std::string_view api = api_of(name);
  for (std::string_view f : {"layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "normalize"})
    if (api == f) return true;
  return false;
}

// A module entry of a class that computes a map linear in its input
// (nn.Linear and subclasses -- names ending in "Linear" --, convolutions,
// transformers' Conv1D).
bool linear_module(std::string_view name) {
  const std::string_view c = split_module_entry(name).class_name;
  constexpr std::string_view kLinear = "Linear";
  if (c.size() >= kLinear.size() && c.substr(c.size() - kLinear.size()) == kLinear) return true;
  for (std::string_view conv : {"Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
                                "Conv1D"})
    if (c == conv) return true;
  return false;
}

// The module path of a module entry ("Module.layers.0.mlp.MLP.forward.3" ->
// "layers.0.mlp"; backward records too); "" for API entries and for
// parameters_grad entries (not calls).
std::string_view module_path(std::string_view name) {
  const ModuleEntryName m = split_module_entry(name);
  const bool call = m.direction == "forward" || m.direction == "backward" || m.direction.substr(0, 13) == "backward_pass";
  return call ? m.path : std::string_view();
}

// Whether module path p lies under parent ("layers.0.mlp" under "layers.0").
bool under_path(std::string_view p, std::string_view parent) {
  return p.size() > parent.size() && p.compare(0, parent.size(), parent) == 0 && p[parent.size()] == '.';
}

// A group of rows (an entry's inputs, parameters or outputs), per class of
// statistic: the largest e and z over all its rows, and the largest e over
// the rows beyond noise (z > 1) with the first row giving it.
struct Peak {
  ClassZ e{0.0, 0.0, 0.0}, z{0.0, 0.0, 0.0}, e_beyond{0.0, 0.0, 0.0};
  std::array<size_t, kNumClasses> row{0, 0, 0};  // of e_beyond
  std::array<bool, kNumClasses> beyond{false, false, false};
  double any_z() const { return *std::max_element(z.begin(), z.end()); }
  void add(const ClassZ& re, const ClassZ& rz, size_t i) {
    for (int c = 0; c < kNumClasses; ++c) {
      e[c] = std::max(e[c], re[c]);
      z[c] = std::max(z[c], rz[c]);
      if (rz[c] > 1 && (!beyond[c] || re[c] > e_beyond[c])) e_beyond[c] = re[c], row[c] = i, beyond[c] = true;
    }
  }
};

std::string entry_list(const Dump& target, const std::vector<uint32_t>& entries) {
  std::string out;
  const size_t shown = std::min<size_t>(entries.size(), 5);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + target.entries[entries[i]];
  if (entries.size() > shown) out += " and " + std::to_string(entries.size() - shown) + " more";
  return out;
}

// Whether both records hold a Sketch of finite sums.
bool finite_sketches_of(const Sketch* t, const Sketch* b) {
  if (t == nullptr || b == nullptr) return false;
  for (int k = 0; k < 4; ++k)
    if (!std::isfinite((*t)[k]) || !std::isfinite((*b)[k])) return false;
  return true;
}

// Whether a floating record holds a mask value: an element of magnitude
// 1e9 or more (transformers' attention masks: -1e9, LongT5's -1e10,
// finfo.min), which no activation of a working model reaches. Its Norm and
// Sketch are then the mask's, equal on both sides but for the mask's own
// rounding: its Sketch error says nothing about the other elements (a clean
// bfloat16 LongT5 step 1: scores plus a -1e10 mask 6e-5 apart by their
// Sketch, from scores 1.5 % apart; the softmax of them named at 0.92 %).
bool holds_mask_value(const TensorRecord& b) {
  constexpr double kMaskMagnitude = 1e9;
  const auto mx = numeric(b, kStatMax), mn = numeric(b, kStatMin);
  return (mx && std::fabs(*mx) >= kMaskMagnitude) || (mn && std::fabs(*mn) >= kMaskMagnitude);
}

// Error e of a row whose floor is f is beyond what `reference` explains:
// more than R x reference (what the inputs carry, propagated) plus f (the
// rounding the entry itself may add). With reference 0 this is z > 1.
bool exceeds(double e, double ratio, double reference, double f) {
  const double explained = (ratio == 0 || reference == 0) ? 0.0 : ratio * reference;
  return e > explained + f;  // inf against inf: not beyond
}

}  // namespace

std::string short_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  char buf[32];
  // Two significant digits; below 1e-2 always with an exponent ("1e-4",
  // "2e-3", as the floor table is written, not "0.0001").
  std::snprintf(buf, sizeof buf, std::fabs(v) < 1e-2 ? "%.1e" : "%.2g", v);
  std::string s(buf);
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  // "1.0e-04" -> "1e-4", "1.5e+05" -> "1.5e5"
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  if (mant.size() > 2 && mant.compare(mant.size() - 2, 2, ".0") == 0) mant.resize(mant.size() - 2);
  std::string sign;
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) {
    if (exp[0] == '-') sign = "-";
    exp.erase(0, 1);
  }
  exp.erase(0, std::min(exp.find_first_not_of('0'), exp.size() - 1));
  return mant + "e" + sign + exp;
}

RowError row_error(const TensorRecord& t, const TensorRecord& b, double floor_scale, const NoiseFloor* at_least,
                   const Sketch* t_sketch, const Sketch* b_sketch, double produced_from_rms) {
  RowError r;
  const bool tensors = t.is_tensor && b.is_tensor;
  r.floor = &noise_floor_for(b.dtype, tensors, &r.floor_assumed);
  const double smallest_normal = r.floor->smallest_normal;  // of the record's own dtype
  // Data is no more precise than the data it was computed from (integer and
  // bool tensors stay exact: see find_first_divergence).
  if (tensors && at_least && r.floor->aggregate > 0 && at_least->aggregate > r.floor->aggregate) {
    r.floor = at_least;
    r.floor_assumed = false;
    r.floor_from_upstream = true;
  }
  if (t.is_tensor != b.is_tensor) {
    r.hard = std::string("the ") + (t.is_tensor ? "target" : "bench") + " has a tensor, the other side a value";
  } else if (!tensors) {
    if (t.kinds[kStatMax] == ValueKind::kFloat && b.kinds[kStatMax] == ValueKind::kFloat) {
      // A Python float carries the rounding of whatever computed it (.item()
      // of a float32 tensor, a scale derived from data): weighed against the
      // float32 floor, relative to itself, not as an exact value.
      r.floor = &noise_floor_for("torch.float32", true);
      const double e = scaled_error(*t.stats[kStatMax], *b.stats[kStatMax], std::fabs(*b.stats[kStatMax]));
      r.e[kStatMax] = e;
      r.e[kStatMean] = e;
      r.z = e / (r.floor->aggregate * floor_scale);
      r.z_class = {r.z, r.z, 0.0};
      r.e_class = {e, e, 0.0};
      r.worst_stat = r.z > 0 ? kStatMax : -1;
      return r;
    }
    if (!python_equal(t, b, kStatMax)) r.hard = "value differs: " + stat_str(t, kStatMax) + " vs " + stat_str(b, kStatMax);
  } else if (t.dtype != b.dtype) {
    r.hard = "dtype differs: " + t.dtype + " vs " + b.dtype;
  } else if (!same_shape(t, b)) {
    r.hard = "shape differs: " + shape_of(t) + " vs " + shape_of(b);
  } else if ((is_inf_or_nan(t, kStatMax) || is_inf_or_nan(t, kStatMin)) && !is_inf_or_nan(b, kStatMax) &&
             !is_inf_or_nan(b, kStatMin)) {
    r.hard = "target " + std::string(is_inf_or_nan(t, kStatMax) ? "Max is " + stat_str(t, kStatMax) : "Min is " + stat_str(t, kStatMin)) +
             " while the bench's Max and Min are finite";
  }
  if (!tensors) {
    r.z = r.hard.empty() ? 0 : kInf;
    r.z_class = {r.z, r.z, r.z};
    r.e_class = {r.z, r.z, r.z};
    return r;
  }
  // RMS of the bench tensor: the scale against which a Max, Min or Mean
  // difference is measured when the statistic itself is near 0; at least the
  // RMS expected from what produced the record (a cancellation residue is
  // judged against the values it was computed from).
  double rms = bench_rms(b);
  const double n = numel(b);
  if (produced_from_rms > rms && n > 0) {
    rms = produced_from_rms;
    r.produced_from_rms = produced_from_rms;
  }
  // Below the dtype's smallest normal number values are subnormal: their
  // rounding is absolute, an ulp of that number, and a kernel that flushes
  // them to zero moves them whole; so the relative errors are taken of at
  // least that scale. A tiny EfficientNet whose activations had vanished to
  // 1e-41 (float32) had a BatchNorm's output 0.46 % apart by its Sketch from
  // inputs equal bit for bit.
  if (n > 0) rms = std::max(rms, smallest_normal);
  const double l2_scale = n > 0 ? rms * std::sqrt(n) : 0.0;
  r.few_elements = few_elements_floor(*r.floor, b, &r.effective_elements);
  auto judge = [&](int s, double e) {
    const double floor = floor_of(r, s, floor_scale);
    const double z = floor > 0 ? e / floor : (e > 0 ? kInf : 0);
    r.z_class[stat_class(s)] = std::max(r.z_class[stat_class(s)], z);
    r.e_class[stat_class(s)] = std::max(r.e_class[stat_class(s)], e);
    if (z > r.z) {
      r.z = z;
      r.worst_stat = s;
    }
  };
  for (int s = 0; s < kNumStats; ++s) {
    if (t.kinds[s] == ValueKind::kNone || b.kinds[s] == ValueKind::kNone) continue;
    const auto tv = numeric(t, s), bv = numeric(b, s);
    double e;
    if (!tv || !bv) e = same_print(t, b, s) ? 0 : kInf;  // booleans, text
    else e = scaled_error(*tv, *bv, s == kStatNorm ? std::max(std::fabs(*bv), l2_scale) : std::max(std::fabs(*bv), rms));
    r.e[s] = e;
    judge(s, e);
  }
  if (t_sketch && b_sketch) {
    // |t - b|_2 estimated from the four signed sums, relative to |b|_2 (the
    // Norm; at least the scale expected from what produced the record).
    const double d = sketch_distance(*t_sketch, *b_sketch);
    const auto norm = numeric(b, kStatNorm);
    if (std::isfinite(d) && norm && std::isfinite(*norm)) {
      const double scale = std::max(std::fabs(*norm), l2_scale);
      const double e = d == 0 ? 0.0 : (scale > 0 ? d / scale : kInf);
      r.e_sketch = e;
      judge(kStatSketch, e);
    }
  }
  if (!r.hard.empty()) {
    r.z = kInf;
    r.z_class = {kInf, kInf, kInf};
    r.e_class = {kInf, kInf, kInf};
    r.worst_stat = -1;
  }
  return r;
}

namespace {

// A parameter row, or an API input that is the same tensor as one
// (result.parameter_of): both keep their own dtype's floor and follow the
// parameter rules.
bool judged_as_parameter(const CompareResult& result, size_t i) {
  const CompareRow& r = result.rows[i];
  if (r.target < 0) return false;
  if (is_parameter_row(result.target.rows[static_cast<size_t>(r.target)], result.target.entries)) return true;
  return i < result.parameter_of.size() && result.parameter_of[i] >= 0;
}

// A dump that records a backward pass (a training step): a backward call or
// a parameters_grad entry.
bool records_backward(const Dump& d) {
  for (const std::string& e : d.entries)
    if (e.find(".backward") != std::string::npos || e.find(".parameters_grad") != std::string::npos) return true;
  return false;
}

// The coarser of two floors (either may be null).
const NoiseFloor* coarser(const NoiseFloor* a, const NoiseFloor* b) {
  if (!a) return b;
  if (!b) return a;
  return b->aggregate > a->aggregate ? b : a;
}

// Folds the floating floors of the matched tensor rows of [begin, end) with
// the given role (inputs: not parameters) into *floor.
void fold_floors(const CompareResult& result, size_t begin, size_t end, Role role, const NoiseFloor** floor) {
  for (size_t i = begin; i < end; ++i) {
    const CompareRow& r = result.rows[i];
    if (r.match != MatchKind::kMatched) continue;
    const TensorRecord& t = result.target.rows[static_cast<size_t>(r.target)];
    const TensorRecord& b = result.bench.rows[static_cast<size_t>(r.bench)];
    if (t.role != role || !t.is_tensor || !b.is_tensor || judged_as_parameter(result, i)) continue;
    const NoiseFloor* f = &noise_floor_for(b.dtype, true);
    if (f->aggregate > 0) *floor = coarser(*floor, f);
  }
}

}  // namespace

RowError row_error_of(const CompareResult& result, size_t index) {
  const CompareRow& row = result.rows.at(index);
  if (row.match != MatchKind::kMatched) throw std::invalid_argument("row_error_of: row is not matched");
  const TensorRecord& t = result.target.rows[static_cast<size_t>(row.target)];
  const NoiseFloor* at_least = nullptr;
  if (!judged_as_parameter(result, index) && t.entry < result.data_floors.size())
    at_least = result.data_floors[t.entry];
  const TensorRecord& b = result.bench.rows[static_cast<size_t>(row.bench)];
  const double produced = index < result.produced_from_rms.size() ? result.produced_from_rms[index] : 0.0;
  return row_error(t, b, result.floor_scale, at_least, sketch_of(result.target, t), sketch_of(result.bench, b), produced);
}

void find_first_divergence(CompareResult& result, const Thresholds& th) {
  const Dump& target = result.target;
  const Dump& bench = result.bench;
  auto& rows = result.rows;
  const double scale = th.floor_scale;
  result.first_divergence.reset();
  result.divergence.reset();
  result.noise = {};
  result.floors_used.clear();
  result.floor_scale = scale;
  for (CompareRow& r : rows) r.first_divergence = false;

  // Pass 1, per entry: every matched row's error (z kept on the row; z and
  // e per class of statistic kept here), the floors in use, the parameter
  // rows of the whole pair. Data (inputs and outputs, not parameters) is
  // measured against the coarsest floating floor of the data so far, its
  // entry's inputs included: a compiler may keep in float32 an intermediate
  // that eager rounds to bfloat16, and every float32 value computed from it
  // then differs from eager's at bfloat16's rounding, although the recorded
  // bfloat16 inputs agree exactly.
  const auto& table = noise_floor_table();
  const NoiseFloor* exact = &table.back();
  std::vector<bool> used(table.size(), false);
  std::vector<ClassZ> ec(rows.size(), ClassZ{0.0, 0.0, 0.0}), zc(rows.size(), ClassZ{0.0, 0.0, 0.0});
  // e of an input row measured against its own RMS, where ec measured it
  // against the larger scale of what produced it (a residue passed on): the
  // call's outputs are measured at their own size, so this is what explains
  // them (for a residue, its largest e in any class: below).
  // Only residues (produced_from_rms > 0) differ from ec: kept apart, so
  // that a large compare does not hold a third ClassZ per row at its peak.
  std::unordered_map<size_t, ClassZ> own_residue;
  auto finite_sketches = [&](const TensorRecord& t, const TensorRecord& b) {
    return finite_sketches_of(sketch_of(target, t), sketch_of(bench, b));
  };
  auto own = [&](size_t i) -> const ClassZ& {
    const auto it = own_residue.find(i);
    return it == own_residue.end() ? ec[i] : it->second;
  };
  // Outputs with Sketches whose Mean/Norm-class error is their Mean's: the
  // Norm's error alone (see the output rule in pass 2); -1 elsewhere.
  // Allocated with the first such row (dumps without Sketches need none).
  std::vector<float> aggregate_without_mean;
  // Integer and bool tensors (exact floor) whose dtype and shape agree: an
  // argmax or a mask (x > 0) computed from floating inputs flips with their
  // rounding, so such an output cannot be weighed against its inputs' noise.
  std::vector<bool> discrete(rows.size(), false);
  // Each row's floor: its index in the table (one byte a row, not a ClassZ).
  std::vector<uint8_t> floor_index(rows.size(), 0);
  // A matched row's few-elements floor (few_elements_floor; 0 where the
  // table's floors are higher): a function of its floor row and bench record.
  auto few = [&](size_t i) {
    return few_elements_floor(table[floor_index[i]], bench.rows[static_cast<size_t>(rows[i].bench)]);
  };
  auto fl = [&](size_t i, int c) {
    return sized_class_floor(table[floor_index[i]], c, c == kExtremeClass ? 0.0 : few(i)) * scale;
  };
  const double float32_aggregate = noise_floor_for("torch.float32", true).aggregate;
  std::vector<double> sum_condition;
  result.produced_from_rms = expected_rms_from_producers(result, kExpectedMargin, &sum_condition);
  result.parameter_of = parameter_rows_of_inputs(result);
  result.follows_flip.assign(rows.size(), false);
  result.argument_without_effect.assign(rows.size(), false);
  result.arguments_without_effect.clear();
  std::vector<bool> drifting = residue_gradient_parameters(result, result.produced_from_rms);
  // From step 2 on, parameters the step before says carry a difference
  // (parameters_across_steps.h): explaining, no cause.
  std::vector<bool> carried(rows.size(), false);
  if (!result.parameters_as_causes && !result.carried_parameters.empty())
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].target < 0) continue;
      const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
      if (!is_parameter_row(t, target.entries)) continue;
      const std::string key = parameter_key(t, target.entries);
      if (std::binary_search(result.carried_parameters.begin(), result.carried_parameters.end(), key))
        carried[i] = drifting[i] = true;
    }
  // An API input that is a drifting parameter drifts with it.
  for (size_t i = 0; i < rows.size(); ++i)
    if (result.parameter_of[i] >= 0) drifting[i] = drifting[static_cast<size_t>(result.parameter_of[i])];
  auto parameter = [&](size_t i) { return judged_as_parameter(result, i); };
  // At a training run's step 1 every parameter carries the first update
  // (CompareOptions::step): none is a cause, all explain. Not later: a
  // weight nudged (or a bit flipped) between later steps looks the same to
  // one pair, and the step before says how far the drift had come
  // (CompareOptions::carried_parameters, above).
  result.parameters_after_update = !result.parameters_as_causes && result.step == 1 && records_backward(target);
  // Unless step 0 says how far apart the first update may leave each
  // parameter (CompareOptions::update_basis): then the parameter rows beyond
  // that bound are causes, where they are at least half of those judged and
  // more than one (parameters_across_steps.h: one parameter beyond is a
  // residue part of its gradient; an optimizer step that differs moves them
  // all). Per row; empty where the rule names none.
  std::vector<bool> update_differs;
  result.update_rows_judged = result.update_rows_beyond = 0;
  if (result.parameters_after_update && !result.update_basis.empty()) {
    update_differs.assign(rows.size(), false);
    const auto& basis = result.update_basis;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].match != MatchKind::kMatched) continue;
      const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
      if (!is_parameter_row(t, target.entries)) continue;
      const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
      const Sketch* ts = sketch_of(target, t);
      const Sketch* bs = sketch_of(bench, b);
      const OptDouble& norm = b.stats[kStatNorm];
      if (!ts || !bs || !norm) continue;
      const std::string key = parameter_key(t, target.entries);
      const auto it = std::lower_bound(basis.begin(), basis.end(), key,
                                       [](const UpdateBasis& u, const std::string& k) { return u.key < k; });
      if (it == basis.end() || it->key != key) continue;
      const double floor_abs = noise_floor_for(b.dtype, true).sketch * scale * std::fabs(*norm);
      const UpdateJudgment j = first_update_beyond(*it, *ts, *bs, floor_abs);
      result.update_rows_judged += j.judged;
      if (j.beyond) {
        update_differs[i] = true;
        ++result.update_rows_beyond;
      }
    }
    if (!(result.update_rows_beyond >= 2 && result.update_rows_beyond * 2 >= result.update_rows_judged))
      update_differs.clear();
  }
  // A parameter is a cause on Max/Min/Mean/Norm (cause_z); one the first
  // update's rule names, on its Sketch too: that rule judged it by the
  // Sketch (an update x1.01 moves a parameter 1e-5 of its Norm with lr 1e-3,
  // below the four statistics' float32 floor and 5x the Sketch's).
  // Whether that rule names row i's parameter (an API input that is a
  // parameter: its parameter row's judgment).
  auto update_names = [&](size_t i) {
    if (update_differs.empty()) return false;
    const int64_t p = result.parameter_of[i];
    return static_cast<bool>(update_differs[p >= 0 ? static_cast<size_t>(p) : i]);
  };
  // At step 0 no update has run: parameters are what both runs were given,
  // equal bit for bit, and one whose Sketch alone differs (its values moved
  // by a redistribution, its four statistics kept) is a cause too -- not
  // left for the call that reads it to be explained by it (map_bound).
  auto parameter_z = [&](size_t i) {
    const double z = cause_z(zc[i]);
    return update_names(i) || result.step == 0 ? std::max(z, zc[i][kSketchClass]) : z;
  };
  if (result.parameters_after_update)
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].target >= 0 && parameter(i)) drifting[i] = !update_names(i);
  int64_t params_beyond = 0;  // parameter rows beyond their floor, drifting or not
  int64_t params = 0, params_differing = 0, params_carried = 0;
  const auto ranges = entry_ranges(target, rows);
  result.data_floors.assign(target.entries.size(), nullptr);
  const NoiseFloor* data_floor = nullptr;
  for (const auto& [begin, end] : ranges) {
    fold_floors(result, begin, end, Role::kInput, &data_floor);
    const NoiseFloor* at_least = data_floor;
    result.data_floors[target.rows[static_cast<size_t>(rows[begin].target)].entry] = at_least;
    fold_floors(result, begin, end, Role::kOutput, &data_floor);
    for (size_t i = begin; i < end; ++i) {
      CompareRow& row = rows[i];
      row.z = std::nullopt;
      if (row.match != MatchKind::kMatched) continue;
      const TensorRecord& t = target.rows[static_cast<size_t>(row.target)];
      const TensorRecord& b = bench.rows[static_cast<size_t>(row.bench)];
      const RowError e = row_error(t, b, scale, parameter(i) ? nullptr : at_least,
                                   sketch_of(target, t), sketch_of(bench, b), result.produced_from_rms[i]);
      row.z = e.z;
      zc[i] = e.z_class;
      ec[i] = e.e_class;
      if (t.role == Role::kOutput && e.hard.empty() && e.e_sketch && e.e[kStatMean] && *e.e[kStatMean] > 0 &&
          *e.e[kStatMean] >= ec[i][kAggregateClass]) {
        if (aggregate_without_mean.empty()) aggregate_without_mean.assign(rows.size(), -1.0f);
        aggregate_without_mean[i] = e.e[kStatNorm] ? static_cast<float>(*e.e[kStatNorm]) : 0.0f;
      }
      if (e.produced_from_rms > 0 && t.role == Role::kInput) {
        // A residue's own error, in whichever statistic shows it most: the
        // bulk of its elements is rounding of a larger sum (a Sketch 26 %
        // off while its Max, one large element, agrees), and a call that
        // sums or maps it spreads that into every statistic of its outputs.
        const ClassZ e_own =
            row_error(t, b, scale, parameter(i) ? nullptr : at_least, sketch_of(target, t), sketch_of(bench, b), 0.0)
                .e_class;
        const double m = *std::max_element(e_own.begin(), e_own.end());
        own_residue[i] = {m, m, m};
      }
      discrete[i] = e.floor == exact && e.hard.empty() && t.is_tensor;
      floor_index[i] = static_cast<uint8_t>(e.floor - table.data());
      used[floor_index[i]] = true;
      if (is_parameter_row(t, target.entries)) {
        ++params;
        if (!drifting[i] && parameter_z(i) > 1) ++params_differing;
        if (cause_z(e.z_class) > 1) ++params_beyond;
        if (carried[i] && cause_z(e.z_class) > 1) ++params_carried;
      }
    }
  }
  // The running statistics a batch normalisation in training mode only
  // updates (running_statistics.h): no cause, and nothing they carry reaches
  // its outputs. Their rows keep their z for the CSV.
  const std::vector<bool> unused_running = unused_running_statistics(result, ranges);
  for (size_t i = 0; i < rows.size(); ++i)
    if (unused_running[i]) ec[i] = zc[i] = ClassZ{0.0, 0.0, 0.0};
  result.parameter_rows = params;
  result.parameter_rows_differing = params_beyond;
  result.parameter_rows_carried = params_carried;
  result.differing_parameters = differing_parameters(result, zc);
  // A training step's parameters for the step after it (the first update's rule).
  if (records_backward(target)) result.parameter_basis = parameter_basis(result);
  for (CompareRow& row : rows)
    if (row.target < 0) row.z = std::nullopt;
  for (size_t k = 0; k < table.size(); ++k)
    if (used[k]) {
      NoiseFloor f = table[k];
      f.aggregate *= scale;
      f.extreme *= scale;
      f.sketch *= scale;
      result.floors_used.push_back(f);
    }

  // A non-tensor input (a Python bool, int, string or float argument) that
  // differs beyond its floor, or a tensor input of another shape (same
  // dtype). Not data: it explains nothing downstream by its size (a flag
  // that differs, a shape, has an infinite error), it says the call was made
  // differently -- which matters only where the call's result differs too
  // (pass 2). Under torch.compile transformers' UMT5 hands its decoder's
  // attention a causal mask one column wider ([1, 1, 6, 7] against eager's
  // [1, 1, 6, 6]), whose extra column is masked: the attention's output
  // agreed within float32 rounding, and the clean pair was named there.
  // A matched row whose two records are tensors of one dtype and another shape.
  auto shape_alone_differs = [&](size_t i) {
    const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
    const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
    return t.is_tensor && b.is_tensor && t.dtype == b.dtype && t.shape != b.shape;
  };
  auto argument_differs = [&](size_t i) {
    if (rows[i].match != MatchKind::kMatched || !rows[i].z || *rows[i].z <= 1 || parameter(i)) return false;
    const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
    if (t.role != Role::kInput) return false;
    if (!t.is_tensor && !bench.rows[static_cast<size_t>(rows[i].bench)].is_tensor) return true;
    return shape_alone_differs(i);
  };

  // The module call that encloses the forward module call at range k: the
  // forward call of its parent path (its own up to the last dot) that
  // completes after it -- walking on over the calls inside it (paths under
  // the parent's, API calls) and stopping at the first call outside it (a
  // parent that is not recorded: a ModuleList, the model). Most walks stop
  // within a few entries; a longer one (the decoder layers under an
  // unrecorded ModuleList walk to the model's end) is kept per parent path
  // with where it stopped, and serves every call before that place.
  std::unordered_map<std::string_view, std::pair<std::optional<size_t>, size_t>> long_walks;
  auto enclosing_call = [&](size_t k, std::string_view parent) -> std::optional<size_t> {
    // 0: inside the parent's call, walk on; 1: the parent's forward call;
    // 2: outside it (or the parent's backward), no enclosing call recorded.
    auto at = [&](size_t j) {
      const ModuleEntryName m =
          split_module_entry(target.entries[target.rows[static_cast<size_t>(rows[ranges[j].first].target)].entry]);
      if (m.path.empty()) return 0;  // an API call
      if (m.path == parent) return m.direction == "forward" ? 1 : 2;
      return under_path(m.path, parent) ? 0 : 2;
    };
    constexpr size_t kShortWalk = 8;
    size_t j = k + 1;
    for (; j < ranges.size() && j <= k + kShortWalk; ++j)
      if (const int where = at(j); where != 0) return where == 1 ? std::optional<size_t>(j) : std::nullopt;
    if (j >= ranges.size()) return std::nullopt;
    if (const auto kept = long_walks.find(parent); kept != long_walks.end() && k < kept->second.second)
      return kept->second.first;  // queries come in dump order: the same walk from here
    std::optional<size_t> found;
    for (; j < ranges.size(); ++j)
      if (const int where = at(j); where != 0) {
        if (where == 1) found = j;
        break;
      }
    long_walks[parent] = {found, j};
    return found;
  };

  // The largest e per class of the inputs and parameters of the call at
  // range m; nullopt when one of them says nothing or too little of what
  // its code received (recorded on one side only, an integer or bool that
  // changed, an argument that differs).
  auto call_inputs = [&](size_t m) -> std::optional<ClassZ> {
    ClassZ e{0.0, 0.0, 0.0};
    int64_t matched_inputs = 0, bench_row = -1;
    for (size_t i = ranges[m].first; i < ranges[m].second; ++i) {
      if (rows[i].target < 0 || target.rows[static_cast<size_t>(rows[i].target)].role != Role::kInput) continue;
      if (!rows[i].z || argument_differs(i) || (discrete[i] && *rows[i].z > 0)) return std::nullopt;
      ++matched_inputs;
      bench_row = rows[i].bench;
      if (discrete[i]) continue;
      for (int c : kClasses) e[c] = std::max(e[c], ec[i][c]);
    }
    // The bench's inputs of the same call, each matched (a row recorded on
    // the bench only has no place in the target's entry).
    if (bench_row < 0) return std::nullopt;
    const uint32_t bench_entry = bench.rows[static_cast<size_t>(bench_row)].entry;
    int64_t bench_inputs = 0;
    size_t j = static_cast<size_t>(bench_row);
    while (j > 0 && bench.rows[j - 1].entry == bench_entry) --j;
    for (; j < bench.rows.size() && bench.rows[j].entry == bench_entry; ++j)
      if (bench.rows[j].role == Role::kInput) ++bench_inputs;
    if (bench_inputs != matched_inputs) return std::nullopt;
    return e;
  };

  std::unordered_map<size_t, std::pair<std::optional<ClassZ>, size_t>> scopes;  // scope(), below

  // Pass 2: the entries in dump order. A row's relative error e must be
  // beyond R x what explains it plus its own floor (so beyond noise, z > 1),
  // compared within one class of statistic (docs/formats.md: a bfloat16 Max
  // one ulp off upstream must not hide a Norm 1 % off here) and in e, which
  // means the same in every dtype (an input's noise in bfloat16 explains a
  // float32 output computed from it).
  NoiseSeen seen;
  // U: the largest e per class of the earlier entries' floating rows. Integer
  // and bool rows stay out: one flipped argmax index is off by ~0.1-1
  // relative (z infinite), which would explain away every later fault.
  ClassZ upstream{0.0, 0.0, 0.0};
  // The largest Sketch-class e of the parameters walked so far that drift
  // (after an update, or a residue's: not causes).
  double drift_sketch = 0;
  // An integer/bool output upstream differed (a flipped argmax or mask): its
  // consumers' integer/bool inputs then differ for a reason that is recorded.
  bool discrete_output_differed = false;
  // An integer/bool output upstream was computed from floating inputs that
  // differ beyond float32 rounding: it may have flipped although its
  // statistics agree. They cannot see a permutation -- a near tie in
  // Mixtral's top-2 swaps two experts' slots: the indices' Max, Min, Mean
  // and Norm stay, torch.where over the mask then returns the tokens in
  // another order, and the tokens gathered for an expert differ 92 % by
  // their Sketch with every other statistic equal.
  bool discrete_may_differ = false;
  const double ratio = th.divergence_ratio;
  std::optional<uint32_t> last_matched;
  std::vector<uint32_t> unmatched_since;
  std::vector<uint32_t> changed_since;  // entries since then whose integer records changed
  auto max2 = [](const ClassZ& a) { return *std::max_element(a.begin(), a.end()); };
  // R per class (the Sketch's: kSketchRatioFactor x R).
  auto ratio_of = [&](int c) { return c == kSketchClass ? ratio * kSketchRatioFactor : ratio; };
  // Per range already walked: its module path (kApiCall for an API call) and the
  // largest e of its floating outputs, for the children rule below.
  std::vector<std::string_view> walked_path;
  std::vector<ClassZ> walked_out;
  // Per forward entry walked: the largest e per class of its inputs (at
  // their own size) and parameters. Its backward call computes from them
  // too (the weights, the saved activations), not only from the gradients
  // it receives: they explain its outputs.
  std::unordered_map<std::string_view, ClassZ> forward_explains;
  walked_path.reserve(ranges.size());
  walked_out.reserve(ranges.size());
  // The place in walked_path from which, up to `here`, every entry walked is
  // an API call or a module under `path`: the calls that completed inside a
  // call of `path` since it began (children rule, scope below).
  auto inside_since = [&](std::string_view path, size_t here) {
    size_t from = here;
    while (from > 0 && (walked_path[from - 1] == kApiCall || under_path(walked_path[from - 1], path))) --from;
    return from;
  };
  // A pair that agrees bit for bit (bitwise_pair.h): whether every entry so
  // far does, and the same-code keys of those that did, with the first such.
  SameCodeKeys same_code(target, rows);
  bool bitwise_so_far = true;
  std::unordered_map<uint64_t, uint32_t> reproduced;
  // The floating output rows of the entries walked so far, by the bench's
  // values (same_values.h), the first of each, with the entry's place in
  // walked_path: a module's output whose bench record holds the same values
  // as a child's is the same tensor returned again.
  std::unordered_map<uint64_t, std::pair<size_t, size_t>> earlier_outputs;
  auto same_values_candidate = [&](size_t i) {
    if (!rows[i].z || discrete[i] || parameter(i)) return false;
    const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
    const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
    if (t.role != Role::kOutput || !t.is_tensor || !b.is_tensor || t.dtype != b.dtype) return false;
    const auto norm = numeric(b, kStatNorm);
    return norm && *norm > 0 && std::isfinite(*norm);
  };
  // The largest absolute L2 error of a residue in the backward walked so
  // far (a gradient zero in theory: cancellation.h), at its own size. Its
  // relative error is measured against the scale it was cancelled from and
  // stays small, but code that is not recorded can add it whole into a
  // larger gradient: ConvNeXt's pooled final LayerNorm, whose input
  // gradient (a residue 98 % apart) a mean-pool's backward spreads into the
  // last hidden state's gradient (0.003 % apart, 20x the float32 floor,
  // with nothing recorded before it beyond 3e-7). A backward input whose
  // absolute L2 error is within R x that is explained. The mean-pool passes
  // it on with an L2 gain of 1 / sqrt(N), below 1; where unrecorded code
  // amplifies it further (the backward of a broadcast sums over it), more
  // than R x arrives and the input is named as before.
  double residue_abs = 0;
  // Per module (the entry name before ".backward.N"), the largest relative
  // L2 error (Sketch, at its own size) of what its backward calls computed
  // from: the gradients arriving and the saved forward inputs. The
  // module's parameters_grad records are sums of their products (a
  // BatchNorm weight's gradient: sum of gradient x normalised input over
  // batch and space) and move with them, in every statistic -- a clean
  // bfloat16 ResNet step moved a BatchNorm weight gradient 11 % in Norm
  // from an arriving gradient 29 % apart by its Sketch.
  std::unordered_map<std::string_view, double> backward_sketch;
  // Per forward call of a depthwise convolution (one input channel per
  // group: weight [C, 1, k...]), its kernel's taps: each element of its
  // input's gradient is a sum of that many products (below).
  std::unordered_map<std::string_view, double> depthwise_taps;
  // A residue row's absolute L2 error: its relative L2 error at its own
  // size (the Sketch's; the Norm's without one) times the bench's Norm.
  auto residue_error = [&](size_t i) {
    const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
    const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
    const auto norm = numeric(b, kStatNorm);
    if (!norm || !std::isfinite(*norm)) return 0.0;
    const RowError e = row_error(t, b, scale, nullptr, sketch_of(target, t), sketch_of(bench, b), 0.0);
    const OptDouble& rel = e.e_sketch ? e.e_sketch : e.e[kStatNorm];
    return rel && std::isfinite(*rel) ? *rel * std::fabs(*norm) : 0.0;
  };
  for (size_t range_index = 0; range_index < ranges.size(); ++range_index) {
    const auto& [begin, end] = ranges[range_index];
    const uint32_t entry = target.rows[static_cast<size_t>(rows[begin].target)].entry;
    Peak in, par, out, out_discrete;
    ClassZ in_own{0.0, 0.0, 0.0};  // the inputs' e at their own size (own above)
    bool sketch_unknown = false;
    // Whether every input and parameter is an integer/bool tensor or a
    // value (their statistics may agree over a permutation:
    // discrete_may_differ), and whether the entry has an integer/bool output.
    bool only_discrete_inputs = true, has_discrete_output = false;
    int64_t matched = 0, inputs_matched = 0, inputs_one_side = 0, tensor_outputs = 0;
    size_t par_row = begin;
    double par_z = 0;
    double own_drift = 0;  // the largest Sketch-class e of the entry's drifting parameters
    // An integer/bool record changed (a flipped mask, a routed index; here
    // or in an earlier entry): a tensor whose shape follows it
    // (torch.where(mask), x[mask], the tokens an expert receives) differs in
    // shape for that recorded reason -- explained, like a flipped integer
    // output, and no part of U (its error is infinite).
    bool discrete_input_changed = false;
    for (size_t i = begin; i < end; ++i)
      if (discrete[i] && rows[i].z && *rows[i].z > 0 &&
          target.rows[static_cast<size_t>(rows[i].target)].role == Role::kInput)
        discrete_input_changed = true;
    auto shape_follows_changed_input = [&](size_t i) {
      return (discrete_input_changed || discrete_output_differed) && rows[i].z && shape_alone_differs(i);
    };
    // The entry's arguments that differ beyond their floor (a flag, a size,
    // a Python float, a tensor's shape): weighed after the outputs, not as
    // data (argument_differs above).
    std::vector<size_t> arguments;
    for (size_t i = begin; i < end; ++i) {
      const CompareRow& r = rows[i];
      if (r.match != MatchKind::kMatched) {
        if (r.target >= 0 && target.rows[static_cast<size_t>(r.target)].role == Role::kInput) ++inputs_one_side;
        continue;
      }
      ++matched;
      const TensorRecord& t = target.rows[static_cast<size_t>(r.target)];
      if (t.role == Role::kOutput) {
        (discrete[i] ? out_discrete : out).add(ec[i], zc[i], i);
        has_discrete_output = has_discrete_output || discrete[i];
        if (t.is_tensor && bench.rows[static_cast<size_t>(r.bench)].is_tensor) ++tensor_outputs;
        continue;
      }
      // A tensor of another shape that follows a changed integer record is
      // data the flip explains (below), not the way the call was made.
      if (argument_differs(i) && !shape_follows_changed_input(i)) {
        arguments.push_back(i);
        continue;
      }
      if (!discrete[i] && t.is_tensor) only_discrete_inputs = false;
      if (parameter(i)) {
        par.add(ec[i], zc[i], i);
        if (drifting[i]) own_drift = std::max(own_drift, ec[i][kSketchClass]);
        // A parameter whose gradient is zero in theory drifts under the
        // optimizer (cancellation.h): its error explains, it is no cause.
        if (!drifting[i] && parameter_z(i) > par_z) par_z = parameter_z(i), par_row = i;
      } else {
        in.add(ec[i], zc[i], i);
        for (int c : kClasses) in_own[c] = std::max(in_own[c], own(i)[c]);
        ++inputs_matched;
        if (t.is_tensor && !discrete[i] &&
            (!finite_sketches(t, bench.rows[static_cast<size_t>(r.bench)]) ||
             holds_mask_value(bench.rows[static_cast<size_t>(r.bench)])))
          sketch_unknown = true;
      }
    }
    // Inputs recorded on one side only say nothing about what they carry:
    // the outputs are weighed against everything upstream instead, not
    // against inputs "that agree exactly".
    const bool inputs_unknown = inputs_matched == 0 && inputs_one_side > 0;
    if (inputs_unknown)
      for (int c : kClasses) in_own[c] = std::max(in_own[c], upstream[c]);
    // A floating input without a finite Sketch on both sides (a sum that
    // overflowed: attention scores holding a causal mask of -3.4e38) says
    // nothing about its relative L2 error; the Sketch class weighs the
    // outputs against everything upstream instead of "inputs that agree
    // exactly" (an OLMoE softmax named that way, clean). Nor does one
    // holding a mask value (holds_mask_value): its Sketch is the mask's.
    if (sketch_unknown) in_own[kSketchClass] = std::max(in_own[kSketchClass], upstream[kSketchClass]);
    if (matched == 0) {
      unmatched_since.push_back(entry);
      bitwise_so_far = false;
      continue;
    }
    // Integer/bool outputs are the entry's own doing when its inputs and
    // parameters agree to float32 rounding (relative error at most 1e-6, and
    // within their floor; then any change is a divergence: a router that
    // sends a token elsewhere); beyond it, rounding of the inputs explains a
    // flipped argmax (a near tie), and they only add to what is upstream.
    // Not the whole floor: a clean bfloat16 OLMoE under inductor flipped a
    // top-2 expert with its float32 router probabilities 1.5e-4 apart
    // (bfloat16 rounding carried from upstream, 0.03 of their floor).
    const bool inputs_within_floor = !inputs_unknown && in.any_z() <= 1 && par.any_z() <= 1 &&
                                     max2(in.e) <= kIntegerFlipInputs && max2(par.e) <= kIntegerFlipInputs;
    const bool inputs_exact = !inputs_unknown && in.any_z() == 0 && par.any_z() == 0;
    for (size_t i = begin; i < end; ++i)
      if (shape_follows_changed_input(i)) result.follows_flip[i] = true;
    if (inputs_exact)
      for (size_t i = begin; i < end; ++i)
        if (discrete[i] && rows[i].z) out.add(ec[i], zc[i], i);
    // A module's outputs are computed by its children (and the API calls
    // inside it): the recorded entries that completed since it began --
    // walking back, API entries and modules whose path lies under this
    // one's, up to the first module that does not. Their outputs' errors
    // explain this one's as its inputs' do (a child's weight that drifted
    // after an optimizer step moves its parent's output too).
    const std::string_view path = module_path(target.entries[entry]);
    ClassZ children{0.0, 0.0, 0.0};
    // the first child's place in walked_path
    const size_t children_from = path.empty() ? walked_path.size() : inside_since(path, walked_path.size());
    for (size_t j = children_from; j < walked_path.size(); ++j)
      for (int c : kClasses) children[c] = std::max(children[c], walked_out[j][c]);
    // What unrecorded code inside the enclosing call, before this call's
    // inputs, can have computed from: that call's inputs and parameters and
    // what its children completed so far (walking back as above, under its
    // path). Looked up only for an input above its floor alone; nullopt
    // keeps U (everything upstream).
    // Per enclosing call, kept for its later children (a module called in a
    // loop would otherwise walk back over every earlier call, n^2): the
    // scope so far and the place in walked_path it covers up to. Every entry
    // between two children of one call completed inside it.
    const size_t here = walked_path.size();
    auto scope = [&, here](const std::string_view parent_path, size_t m) -> std::optional<ClassZ> {
      auto it = scopes.find(m);
      if (it == scopes.end()) {
        std::optional<ClassZ> e = call_inputs(m);
        it = scopes.emplace(m, std::make_pair(e, e ? inside_since(parent_path, here) : here)).first;
      }
      auto& [e, upto] = it->second;
      if (e)
        for (; upto < here; ++upto)
          for (int c : kClasses) (*e)[c] = std::max((*e)[c], walked_out[upto][c]);
      return e;
    };
    // Computed at the first input that asks (upstream_of_inputs); the
    // caller asks only in a forward call, whose module path says where it is.
    bool scope_looked_up = false;
    std::optional<ClassZ> scoped_upstream;
    uint32_t scope_entry = 0;  // the enclosing call's entry, where scoped_upstream holds a value
    auto upstream_of_inputs = [&]() -> const ClassZ& {
      if (!scope_looked_up) {
        scope_looked_up = true;
        if (const size_t dot = path.rfind('.'); dot != std::string_view::npos) {
          const std::string_view parent = path.substr(0, dot);
          if (const auto m = enclosing_call(range_index, parent)) {
            scoped_upstream = scope(parent, *m);
            scope_entry = target.rows[static_cast<size_t>(rows[ranges[*m].first].target)].entry;
          }
        }
        if (scoped_upstream)
          for (int c : kClasses) (*scoped_upstream)[c] = std::min((*scoped_upstream)[c], upstream[c]);
      }
      return scoped_upstream ? *scoped_upstream : upstream;
    };
    // An API call does not say which module it runs in. The next module call
    // to complete after it is that module or one that ran inside it, so that
    // call's parameters (its own, and inputs that are parameters) are ones
    // the code around the API call can read. After an update their drift
    // explains the API call's inputs as the drift walked so far does: YOLOS
    // slices its position embeddings (a parameter, recorded only as an
    // input of the module that completes next) and interpolates them; after
    // the first AdamW step `F.interpolate`'s input was 4.5 % apart by its
    // Sketch, the parameter 3.8 %, and a clean bfloat16 step was named.
    std::optional<double> next_module_drift;
    auto parameters_of_next_module = [&]() -> double {
      if (next_module_drift) return *next_module_drift;
      next_module_drift = 0.0;
      constexpr size_t kNextModuleWalk = 64;
      for (size_t m = range_index + 1; m < ranges.size() && m <= range_index + kNextModuleWalk; ++m) {
        const auto& [mb, me] = ranges[m];
        const ModuleEntryName n =
            split_module_entry(target.entries[target.rows[static_cast<size_t>(rows[mb].target)].entry]);
        if (n.path.empty()) continue;
        if (n.direction == "forward")
          for (size_t j = mb; j < me; ++j)
            if (rows[j].match == MatchKind::kMatched && drifting[j] && parameter(j))
              *next_module_drift = std::max(*next_module_drift, ec[j][kSketchClass]);
        break;
      }
      return *next_module_drift;
    };
    walked_path.push_back(path.empty() ? kApiCall : path);
    walked_out.push_back(out.e);
    // The inputs' relative L2 error (their Sketch's) bounds how far any
    // statistic of a linear map of them moves: |dMean| / RMS and |dNorm| /
    // Norm by it, one element (Max, Min) by about it. Where the inputs' bulk
    // moved and their extremes, a few large elements, did not (a QK^T whose
    // inputs carry drifted weights; a gradient whose bulk is rounding of
    // larger sums), it explains the outputs' Max and Min. In a backward call
    // also their Mean and Norm (residues passed on, masked by a ReLU, summed
    // over tokens for a bias); not in the forward, where a bfloat16
    // activation's Sketch carries ~1 % of rounding and would explain away a
    // x1.01 fault's Norm (its Max moves by 1 %, inside the 1.6 % floor anyway).
    in_own[kExtremeClass] = std::max(in_own[kExtremeClass], in_own[kSketchClass]);
    const double in_sketch = in_own[kSketchClass];
    const std::string& name = target.entries[entry];
    const bool backward = name.find(".backward") != std::string::npos;
    // Dropout's backward and its kin (the scale rule below): asked once per
    // backward entry, not per row and class.
    const bool random_backward = backward && draws_random(name);
    // In a backward call an output element is a sum over the tokens or the
    // features of products with the incoming gradient (a norm's gradient for
    // its rsqrt: 32 products per element): its error relative to the RMS
    // grows with the gradient's relative L2 error as the Sketch's does (by
    // the sum's condition number), so the inputs' Sketch explains the
    // outputs' Max and Min with the Sketch's R. A gradient scaled by a
    // fault moves the Norm, which this does not touch.
    // After an update the same holds in the forward: an output element is
    // a sum of products with weights that drifted, each by +-lr where the
    // two runs' gradients differed in sign, so one element moves with the
    // weights' and inputs' relative L2 error times the sum's condition
    // number. A clean float32 MoE step 1 (a mean-square loss: residue
    // gradients) moved an expert's down-projection Max 0.099 % with its
    // weight 0.02 % apart by its Sketch. A scale fault moves the Norm, which
    // this does not touch.
    const bool after_update = drift_sketch > 0 || own_drift > 0;
    const double extremes_from_sketch =
        backward ? ratio_of(kSketchClass) * in_sketch
                 : (after_update ? ratio_of(kSketchClass) * std::max(in_sketch, own_drift) : 0.0);
    // Not in a linear module's backward (its input's gradient is the
    // gradient arriving times the weight): there rounding that redistributes
    // the gradient (Sketch 0.3 %, Norm 0.03 % in bfloat16 under inductor)
    // moves the result's Norm by about its Sketch over the square root of
    // its size, while a gradient scaled by a fault moves it by the whole
    // scale -- x1.01 in down_proj's gradient, 1 % in Norm, was explained
    // away by 4 x 0.3 %.
    // Its second-order part stays: a change of relative L2 size s that is
    // not a scale moves the Norm by about s^2 / 2 (|g + d|^2 = |g|^2 + |d|^2
    // for d orthogonal to g), which no longer hides a fault once the
    // gradient is mostly noise -- a clean bfloat16 ConvNeXt step whose
    // gradient arriving at a depthwise convolution was 72 % apart by its
    // Sketch (a residue passed on) moved the convolution's input gradient
    // 8.5 % in Norm. s^2 itself, twice the estimate, for the map's own
    // conditioning.
    // The first-order part, s / sqrt(n) for an arriving gradient of n
    // elements, is what that redistribution moves the Norm (and the Mean,
    // a projection too) by; it matters only where n is small: a clean
    // float32 MoE step under a mean-square loss (its whole backward a
    // residue, 1.4 % apart by the Sketch) moved a 256-element expert
    // gradient's Norm 0.22 % from an arriving one whose Norm agreed to
    // 0.025 %. Scaled by R and above bfloat16's floor it stays below a
    // x1.01 fault's 1 % at 256 elements up to an arriving gradient 3 % apart.
    double arriving_numel = 0;
    if (backward)
      for (size_t i = begin; i < end; ++i)
        if (rows[i].bench >= 0 && target.rows[static_cast<size_t>(rows[i].target)].role == Role::kInput)
          arriving_numel = std::max(arriving_numel, numel(bench.rows[static_cast<size_t>(rows[i].bench)]));
    if (backward && !linear_module(name)) {
      in_own[kAggregateClass] = std::max(in_own[kAggregateClass], in_own[kSketchClass]);
    } else if (backward) {
      const double s = in_own[kSketchClass];
      const double first_order = arriving_numel > 0 ? s / std::sqrt(arriving_numel) : 0.0;
      in_own[kAggregateClass] = std::max({in_own[kAggregateClass], s * s, first_order});
    }
    ClassZ from_forward{0.0, 0.0, 0.0};
    if (const auto it = forward_explains.find(forward_of(name)); it != forward_explains.end()) from_forward = it->second;
    else if (name.find(".forward") != std::string::npos) {
      for (int c : kClasses) forward_explains[name][c] = std::max(in_own[c], max2(par.e));
      // A normalization blows a small row up by its 1/sigma, and its
      // backward multiplies that row's gradient by the same 1/sigma: after
      // an update, what explains the forward output's Sketch (the drifting
      // parameters upstream: "Rows scaled to one size") explains the
      // backward outputs' Sketch and extremes (elements of those rows) too;
      // not their Mean and Norm, which a scale fault moves. A clean bfloat16
      // BEiT step 1: the pooler's layer_norm output 11 % apart by its
      // Sketch from inputs 0.4 % apart (explained), its input gradient
      // 7.9 % from gradients 0.4 % apart.
      if (normalizes_rows(name) && drift_sketch > 0)
        for (int c : {kSketchClass, kExtremeClass})
          forward_explains[name][c] = std::max(forward_explains[name][c], drift_sketch);
    }
    if (const std::string_view m = module_of_backward(name); !m.empty()) {
      double& b = backward_sketch[m];
      b = std::max({b, in_own[kSketchClass], from_forward[kSketchClass]});
    }
    // A parameters_grad entry: what its module's backward calls computed from.
    double gradients_from = 0;
    if (const std::string_view m = module_of_parameters_grad(name); !m.empty())
      if (const auto it = backward_sketch.find(m); it != backward_sketch.end()) gradients_from = it->second;
    // A backward output with fewer elements than the gradient arriving is
    // a sum over the dimensions its forward input was broadcast along (a
    // routing weight's gradient: 32 products of the incoming gradient and
    // the saved expert output per element). Like any sum of products, its
    // Mean, Norm and extremes move with the factors' relative L2 error, the
    // saved forward inputs' Sketch included: a clean bfloat16 OLMoE under
    // inductor moved such a gradient's Norm 1.2 % from saved activations
    // 0.5 % apart (Sketch) whose own Norm agreed to 0.13 %.
    auto reduced_terms = [&](size_t i) {
      const double n = numel(bench.rows[static_cast<size_t>(rows[i].bench)]);
      return backward && n > 0 && 2 * n <= arriving_numel ? arriving_numel / n : 1.0;
    };
    // Such a sum of T terms in a dtype of 8-11 significant bits carries
    // its accumulator's rounding too, up to sqrt(T) times one rounding's
    // where partial sums are rounded to the dtype: eager's bfloat16
    // layer_norm backward on a CPU gave a bias gradient (T = 128) 1-2 %
    // apart from inductor's with inputs equal bit for bit. Its floor grows
    // with sqrt(T); float32 and wider keep theirs (the same kernels drift
    // there by 1e-6, far inside the floor).
    // The same for a depthwise convolution's input gradient, a sum over its
    // kernel's taps (49 for 7x7): a clean bfloat16 ConvNeXt step under
    // inductor moved it 0.89 % by its Sketch (1.8x the floor) from inputs
    // equal bit for bit, about sqrt(49) roundings. Not for a convolution
    // that sums over channels too (hundreds of terms: CPU and GPU kernels
    // accumulate those in float32, and the floor would hide a x1.01 fault).
    double taps = 1;
    if (backward && linear_module(name))
      if (const auto it = depthwise_taps.find(forward_of(name)); it != depthwise_taps.end()) taps = it->second;
    if (!backward && linear_module(name)) {
      int64_t channels = -1;  // the first input's, NCHW
      for (size_t i = begin; i < end && channels < 0; ++i) {
        if (rows[i].bench < 0 || parameter(i)) continue;
        const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
        if (b.role == Role::kInput && b.shape.size() >= 3) channels = b.shape[1];
      }
      for (size_t i = begin; i < end; ++i) {
        if (rows[i].bench < 0 || !parameter(i)) continue;
        const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
        if (b.suffix(bench.entries) != "parameters.weight" || b.shape.size() < 3 || b.shape[1] != 1 ||
            b.shape[0] != channels)
          continue;
        double k = 1;
        for (size_t d = 2; d < b.shape.size(); ++d) k *= static_cast<double>(b.shape[d]);
        if (k > 1) depthwise_taps[name] = k;
      }
    }
    auto reduction_floor = [&](size_t i, int c) {
      const double f = fl(i, c);
      const bool coarse = class_floor(table[floor_index[i]], kAggregateClass) > float32_aggregate;
      // The accumulator's rounding and the few-elements floor are two
      // explanations of one noise: the larger, not their product (a [4, 1]
      // routing weight's gradient, a sum of 32 terms, would hide 5 %).
      return coarse ? std::max(class_floor(table[floor_index[i]], c) * scale * std::sqrt(std::max(reduced_terms(i), taps)), f)
                    : f;
    };
    // Rounding of the forward inputs beyond float32's (1e-6, as for an
    // integer flip) explains such a backward's outputs whatever their error.
    const bool branch_flips = backward && piecewise(name) && max2(from_forward) > kIntegerFlipInputs;
    // An elementwise sum's output error relative to its own RMS, from its
    // terms' errors at their own size: sum_j e_j x RMS_j / RMS_out (e_j the
    // term's relative L2 error, by its Sketch), where the terms cancel (the
    // output's RMS under 1/8 of theirs; otherwise the inputs' errors at
    // their own size rule, as for any call). RWKV's time mixing subtracts
    // two running maxima that are equal but for one element: a clean
    // bfloat16 step 1 had that difference's Norm, resting on the one
    // element, 24 % apart from terms a few 1e-3 apart, and was named.
    auto difference_of_terms = [&](size_t i) -> double {
      const double out_rms = bench_rms(bench.rows[static_cast<size_t>(rows[i].bench)]);
      if (!(out_rms > 0)) return 0.0;
      double error = 0, terms = 0;
      for (size_t j = begin; j < end; ++j) {
        if (!rows[j].z || discrete[j] || target.rows[static_cast<size_t>(rows[j].target)].role != Role::kInput) continue;
        const TensorRecord& b = bench.rows[static_cast<size_t>(rows[j].bench)];
        const auto norm = numeric(b, kStatNorm);
        const double n = numel(b);
        if (!b.is_tensor || !norm || n <= 0) continue;
        const double e = ec[j][kSketchClass];
        if (!std::isfinite(e)) return 0.0;  // a hard difference is no rounding
        const double term_rms = std::fabs(*norm) / std::sqrt(n);
        error += e * term_rms;
        terms += term_rms;
      }
      return terms > kExpectedMargin * out_rms ? error / out_rms : 0.0;
    };
    // A term recorded in a narrow dtype may be the rounding of a wider value
    // that compiled code, fusing the cast into the sum, never rounds: each
    // element of the output then moves by up to half an ulp of each term's
    // element, u (|a_i| + |b_i|), so by u (|a| + |b|) in L2 -- relative to
    // the output, large where the terms cancel. DiffLlama's lambda is
    // exp(.).to(bfloat16) minus another: 0.96875 - 1.015625 in bfloat16 on
    // both sides, -0.046875 in eager bfloat16 and -0.0447 from inductor's
    // float32 values (a clean bfloat16 step 0, named "while its inputs agree
    // exactly"). Judged with ratio 1: the bound is exact.
    auto terms_rounding = [&](size_t i) -> double {
      const auto out_norm = numeric(bench.rows[static_cast<size_t>(rows[i].bench)], kStatNorm);
      if (!out_norm || !(std::fabs(*out_norm) > 0)) return 0.0;
      double d = 0;
      for (size_t j = begin; j < end; ++j) {
        if (!rows[j].z || discrete[j] || target.rows[static_cast<size_t>(rows[j].target)].role != Role::kInput) continue;
        const TensorRecord& b = bench.rows[static_cast<size_t>(rows[j].bench)];
        const auto norm = numeric(b, kStatNorm);
        if (b.is_tensor && norm && std::isfinite(*norm)) d += 0.5 * table[floor_index[j]].element * std::fabs(*norm);
      }
      return d / std::fabs(*out_norm);
    };
    // The largest Sketch-class e of the entry's floating inputs beyond
    // their own Sketch floor (0 where rounding explains them all).
    std::optional<double> sketch_beyond;
    auto in_sketch_beyond = [&]() {
      if (!sketch_beyond) {
        sketch_beyond = 0.0;
        for (size_t j = begin; j < end; ++j) {
          if (!rows[j].z || discrete[j] || parameter(j) || argument_differs(j)) continue;
          if (target.rows[static_cast<size_t>(rows[j].target)].role != Role::kInput) continue;
          const double e = ec[j][kSketchClass];
          if (std::isfinite(e)) sketch_beyond = std::max(*sketch_beyond, e - fl(j, kSketchClass));
        }
      }
      return *sketch_beyond;
    };
    // After an update, the relative error a bounded map's output
    // (bounded_map) may have in class c from its inputs' relative L2 errors
    // e (their Sketch): |d| <= e_A |A| M_B + e_B |B| M_A for a product, M_X the
    // largest Frobenius norm of one matrix of X (product_factor_norm) where
    // the other factor is not broadcast over X's batch, X's whole Norm where
    // it is; |d| <= sqrt(k) (e_x |x| M_w + e_w |w| |x|) for a convolution
    // of k taps, M_w one filter's Frobenius norm at most, plus e_b |b|
    // sqrt(n_out / n_b) for a bias; |d| <= e |x| sqrt(m) for a sum of m
    // elements an output (over m for a mean). Over the output's size in
    // that class -- its Norm for Mean, Norm and Sketch (|dMean| <= |d| /
    // sqrt(n)), the smaller of max(|Max|, RMS) and max(|Min|, RMS) for the
    // extremes (one element moves by at most |d|). 0 where it is not such a
    // map or a Norm or Sketch is missing. Where the terms cancel, the output
    // is far below that and the inputs' drift is amplified: a clean bfloat16
    // PatchTST step 1 had its attention scores q @ k^T 1.1 % apart by their
    // Norm from queries and keys 0.44 % apart by their Sketch, under their
    // floor, moved by the keys' bias after the update. Drift is no random noise: a
    // bias moved by the update shifts every key alike, and the bound is
    // reached. Before any update the inputs differ by rounding grown
    // upstream, of random direction, which a contraction does not amplify
    // by its cancellation: there rule (2) of "Rows scaled to one size"
    // holds, and a x1.02 on a 1x1 convolution whose weights nearly sum to
    // zero, behind inputs 2.5 % apart, stays named.
    auto map_bound = [&](size_t i, int c) -> double {
      const BoundedMap map = backward || !after_update ? BoundedMap::kNone : bounded_map(name);
      if (map == BoundedMap::kNone) return 0.0;
      // A product takes two tensors; a convolution its input, its weight and
      // perhaps a bias; a sum or mean one.
      const int want = map == BoundedMap::kProduct || map == BoundedMap::kConvolution ? 2 : 1;
      const int most = map == BoundedMap::kConvolution ? 3 : want;
      std::array<const TensorRecord*, 3> factor{};
      std::array<double, 3> e{};
      int factors = 0;
      for (size_t j = begin; j < end; ++j) {
        if (rows[j].bench < 0 || target.rows[static_cast<size_t>(rows[j].target)].role != Role::kInput) continue;
        const TensorRecord& b = bench.rows[static_cast<size_t>(rows[j].bench)];
        if (!b.is_tensor) continue;
        const double ej = rows[j].z ? ec[j][kSketchClass] : kInf;
        const bool sketched = b.sketch >= 0 && target.rows[static_cast<size_t>(rows[j].target)].sketch >= 0;
        if (factors == most || discrete[j] || !sketched || !std::isfinite(ej)) return 0.0;
        factor[static_cast<size_t>(factors)] = &b;
        e[static_cast<size_t>(factors++)] = ej;
      }
      if (factors < want || !(e[0] + e[1] + e[2] > 0)) return 0.0;
      const TensorRecord& o = bench.rows[static_cast<size_t>(rows[i].bench)];
      double d = 0;
      if (map == BoundedMap::kProduct) {
        const ProductNorms a = product_factor_norm(*factor[0], o), b = product_factor_norm(*factor[1], o);
        if (!(a.whole > 0) || !(b.whole > 0)) return 0.0;
        d = e[0] * a.whole * (a.batched ? b.matrix : b.whole) + e[1] * b.whole * (b.batched ? a.matrix : a.whole);
      } else if (map == BoundedMap::kConvolution) {
        const TensorRecord& x = *factor[0];
        const TensorRecord& w = *factor[1];
        const auto xn = numeric(x, kStatNorm), wn = numeric(w, kStatNorm);
        const auto wmax = numeric(w, kStatMax), wmin = numeric(w, kStatMin);
        if (!xn || !wn || !wmax || !wmin || !w.shape_text.empty() || w.shape.size() < 3 || w.shape[0] <= 0) return 0.0;
        double taps = 1, filter = 1;
        for (size_t k = 1; k < w.shape.size(); ++k) filter *= static_cast<double>(w.shape[k]);
        for (size_t k = 2; k < w.shape.size(); ++k) taps *= static_cast<double>(w.shape[k]);
        const double w_filter = std::min(std::fabs(*wn), std::sqrt(filter) * std::max(std::fabs(*wmax), std::fabs(*wmin)));
        d = std::sqrt(taps) * (e[0] * std::fabs(*xn) * w_filter + e[1] * std::fabs(*wn) * std::fabs(*xn));
        if (factors == 3) {  // a bias: added once to each output element of its channel
          const auto bn = numeric(*factor[2], kStatNorm);
          const double n_b = numel(*factor[2]), n_out = numel(o);
          if (!bn || !(n_b > 0) || !(n_out > 0)) return 0.0;
          d += e[2] * std::fabs(*bn) * std::sqrt(n_out / n_b);
        }
      } else {
        const auto norm = numeric(*factor[0], kStatNorm);
        const double n_in = numel(*factor[0]), n_out = numel(o);
        if (!norm || !(n_in > 0) || !(n_out > 0)) return 0.0;
        const double m = std::max(1.0, n_in / n_out);
        d = e[0] * std::fabs(*norm) * std::sqrt(m) / (map == BoundedMap::kMean ? m : 1.0);
      }
      double size = 0;
      if (c == kExtremeClass) {
        const double rms = bench_rms(o);
        const auto mx = numeric(o, kStatMax), mn = numeric(o, kStatMin);
        if (mx && mn) size = std::min(std::max(std::fabs(*mx), rms), std::max(std::fabs(*mn), rms));
      } else if (const auto norm = numeric(o, kStatNorm)) {
        size = std::fabs(*norm);
      }
      return size > 0 && std::isfinite(size) && std::isfinite(d) ? d / size : 0.0;
    };
    uint8_t kinds = 0;
    if (par_z > 1) kinds |= kParameterCause;
    int out_class = -1, in_class = -1;
    bool integer_output = false;
    double best_out = -1, best_in = -1, in_reference = 0;
    std::optional<uint32_t> in_scope;  // the enclosing call in_reference came from (scope above)
    for (int c : kClasses) {
      // A parameter that differs explains its outputs in every class (a bias
      // whose Mean moved moves an output's Min): the entry is named for the
      // parameter either way, or the parameter is one that drifts.
      const double ref_out = std::max({in_own[c], max2(par.e), children[c], from_forward[c]});
      for (size_t i = begin; i < end; ++i) {
        if (!rows[i].z || zc[i][c] <= 1) continue;
        const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
        if (t.role == Role::kOutput) {
          if (shape_follows_changed_input(i)) continue;
          if (discrete[i]) {
            if (!inputs_within_floor || (discrete_may_differ && only_discrete_inputs)) continue;
            // Any change counts: the inputs' rounding, within the floor,
            // does not explain it.
            if (ec[i][c] > 0 && !integer_output) best_out = ec[i][c], out_class = c, out.row[c] = i, integer_output = true;
            continue;
          }
          if (integer_output || branch_flips) continue;
          if (c == kExtremeClass && !exceeds(ec[i][c], 1.0, extremes_from_sketch, fl(i, c))) continue;
          double ref = c != kSketchClass && reduced_terms(i) > 1
                           ? std::max(ref_out, from_forward[kSketchClass]) : ref_out;
          if (!backward && elementwise_sum(name)) {
            ref = std::max(ref, difference_of_terms(i));
            if (!exceeds(ec[i][c], 1.0, terms_rounding(i), fl(i, c))) continue;
          }
          // An output whose Norm rests on a few elements (few_elements_floor)
          // moves in Mean and Norm like those elements, by about their
          // relative error, which its inputs' relative L2 error (the Sketch)
          // bounds: x^3 of activations whose bulk moved 1.2 % by the Sketch,
          // their Max not at all, had the cube's Norm (~4 elements) 0.5 %
          // apart in a clean bfloat16 ALBERT step. With ratio 1, not R: a
          // QK^T of 64 elements x1.01 from inputs 0.3 % apart stays named.
          if (c == kAggregateClass && few(i) > 0 && !exceeds(ec[i][c], 1.0, in_sketch, reduction_floor(i, c)))
            continue;
          // A normalization scales every row to one size: a row built from
          // parameters that drifted after an update (DeiT's zero-initialised
          // class and distillation tokens, +-lr after the first AdamW step,
          // their signs from residue gradients 36 % apart) is ~1e-3 of the
          // patch rows at its input, so the input's relative L2 error hardly
          // sees it (0.2 %), and one of 18 rows at its output (the output's
          // Sketch 10 % apart in a clean bfloat16 step). No row's relative
          // error exceeds what it was built from: the drifted parameters
          // upstream explain the Sketch, with ratio 1. Scale faults still move
          // the Norm; before any update (inference, step 0) nothing drifted.
          if (c == kSketchClass && !backward && normalizes_rows(name) && drift_sketch > 0 &&
              !exceeds(ec[i][c], 1.0, drift_sketch, fl(i, c)))
            continue;
          // Inputs whose relative L2 error is beyond their own floor, and
          // accepted upstream (drift after an update; noise grown within R
          // from one call to the next), differ for a reason, not only by
          // this call's rounding: that part bounds how far a map of them
          // moves any statistic, the Norm too. DeiT's class-token rows,
          // scaled up by a LayerNorm (above), made V 2.2 % apart by its
          // Sketch (floor 0.5 %) and the attention's output P @ V 0.47 % by
          // its Norm while V's Norm agreed to 0.05 %. Before any update too:
          // a clean bfloat16 MobileNetV2 in train mode grew its noise
          // through a dozen BatchNorms over 8 elements a channel to a 1x1
          // convolution's input 12.6 % apart by its Sketch (Norm 0.06 %),
          // and its output's Norm moved 0.52 %. Where the inputs are within
          // their floor this explains nothing; where an input is beyond what
          // explains it, the call is named for it first.
          if (c == kAggregateClass && !backward && in_sketch_beyond() > 0 &&
              !exceeds(ec[i][c], 1.0, in_sketch_beyond(), fl(i, c)))
            continue;
          // After an update a product, convolution or sum moves by at most
          // its inputs' drift times how far its terms cancel (map_bound
          // above), in every class: ratio 1, the bound holds to first order.
          if (!exceeds(ec[i][c], 1.0, map_bound(i, c), fl(i, c))) continue;
          // A map of such data can amplify its relative L2 error (a
          // contraction whose terms partly cancel), and an output's Mean and
          // Norm move by at most its own relative L2 error (|dMean| <= |d| /
          // sqrt(n), |d |x|| <= |d|), which its Sketch estimates -- from four
          // projections, so up to R times too low. After an update, an output
          // whose Sketch is within R of its inputs' beyond their floor has
          // its Mean and Norm explained up to R times its own Sketch: a clean
          // bfloat16 XLNet step 1 had its positional scores (an einsum of
          // queries and relative keys) 9.5 % apart by the Sketch, their small
          // Mean 8.1 % of the RMS and Norm 6.1 %, from keys 6.8 % apart (an
          // einsum of fixed sinusoids and a weight the update moved 0.9 %).
          // A scale fault moves the Sketch as much as the Norm: hidden only
          // where it is within R of the drifted data's own error.
          if (c == kAggregateClass && !backward && drift_sketch > 0 && in_sketch_beyond() > 0 &&
              std::isfinite(ec[i][kSketchClass]) &&
              !exceeds(ec[i][kSketchClass], ratio, in_sketch_beyond(), fl(i, kSketchClass)) &&
              !exceeds(ec[i][c], ratio, ec[i][kSketchClass], fl(i, c)))
            continue;
          // Dropout's backward multiplies by its scale 1/(1-p), which one
          // side may round to the gradient's dtype first: every element moves
          // the same way by up to half an ulp. A clean bfloat16 Pegasus in
          // train mode (inductor drawing eager's numbers): each dropout's
          // input gradient 0.12-0.2 % larger under inductor than eager's,
          // from equal gradients -- 1/0.9 = 1.1111 against bfloat16's
          // 1.109375. Its Mean and Norm are explained by that half ulp, its
          // Sketch by an ulp (the scale's half, and each side rounding its
          // own products: p 0.15, 1.17647 against 1.1796875, moved the
          // Sketch 0.71 %); a scale fault beyond them is still named.
          if ((c == kAggregateClass || c == kSketchClass) && random_backward &&
              !exceeds(ec[i][c], 1.0, (c == kSketchClass ? 1.0 : 0.5) * table[floor_index[i]].element, fl(i, c)))
            continue;
          double judged_e = ec[i][c];
          if (c == kAggregateClass && !aggregate_without_mean.empty() && aggregate_without_mean[i] >= 0) {
            // The Mean is a signed sum of the elements, every sign +1: a
            // fifth projection of the change the Sketch's four estimate
            // (|dMean| / RMS is at most the relative L2 error). Where the
            // inputs' Sketch explains it (with the Sketch's R), the Norm
            // alone is judged here: a small mean that moves with its
            // inputs' bulk (QK^T of bfloat16 activations after an
            // optimizer step: Mean 1.7 % of the RMS from inputs whose
            // Mean and Norm moved 0.35 %) is no cause. The Mean still
            // explains what follows (a shifted input moves the Norm of
            // what a ReLU makes of it).
            if (!exceeds(judged_e, ratio_of(kSketchClass), in_sketch, fl(i, c))) judged_e = aggregate_without_mean[i];
          }
          if (exceeds(judged_e, ratio_of(c), ref, reduction_floor(i, c)) && judged_e > best_out)
            best_out = judged_e, out_class = c, out.row[c] = i;
        } else if (!parameter(i)) {
          if ((discrete[i] && discrete_output_differed) || shape_follows_changed_input(i) || argument_differs(i))
            continue;
          // Data that follows an unseen flip is permuted: its Sketch moves,
          // nothing else does; the other classes still judge it.
          if (c == kSketchClass && discrete_may_differ && !discrete[i]) continue;
          // Above its floor alone, a forward module call's input is weighed
          // against what its enclosing call's code could see (scope above)
          // where that is known: a x1.001 softmax scale in a Cohere's second
          // attention (o_proj's input 2.7e-6 apart by its Sketch, 8.6x the
          // clean compile's) hid behind the first attention's returned
          // weights (3.9e-7), which nothing in the second one reads.
          const ClassZ& u = !backward && ec[i][c] > fl(i, c) ? upstream_of_inputs() : upstream;
          double ref_in = std::max(u[c], gradients_from);
          // A parameter's gradient is a sum over T tokens or positions,
          // accumulated in float32 at least: each partial sum rounded, so
          // two correct kernels (eager's, inductor's) differ by about the
          // accumulator's ulp times sqrt(T) times the sum's condition
          // number (cancellation.h). A clean float32 conv/BatchNorm/ReLU
          // stack (8 x 64 x 32 x 32) under inductor had a BatchNorm's bias
          // gradient, T = 8192 terms of condition ~125, 0.068 % apart by its
          // Sketch while every gradient recorded before it agreed to 3e-6.
          if (!sum_condition.empty() && sum_condition[i] > 0)
            ref_in = std::max(ref_in, accumulator_ulp(target.rows[static_cast<size_t>(rows[i].target)].dtype) *
                                          sum_condition[i]);
          // An input's extremes are a few of its own elements, which move
          // with the bulk of the data it was computed from (U's Sketch), not
          // with that data's extremes (other elements): the rotary slice of
          // a clean bfloat16 GPT-J's keys (k[..., :rotary_dim]) had its Max
          // 1.7 % apart after an optimizer step, the keys' own Max 0.3 %, the
          // data upstream 1.2 % by its Sketch. As for outputs above.
          if (c == kExtremeClass) ref_in = std::max(ref_in, u[kSketchClass]);
          // After an update the scope's relative L2 error bounds how far a
          // map of it moves any statistic, as for outputs (rule (2) of "Rows
          // scaled to one size"): a clean DistilBERT step 1 moved P @ V's Norm
          // 1.3 % from V 3 % apart by its Sketch, its Norm 0.07 %.
          if (c == kAggregateClass && &u != &upstream && drift_sketch > 0) ref_in = std::max(ref_in, u[kSketchClass]);
          if (!backward && path.empty() && (drift_sketch > 0 || result.parameters_after_update) &&
              ec[i][c] > fl(i, c))
            ref_in = std::max(ref_in, parameters_of_next_module());
          if (backward && residue_abs > 0) {
            const auto norm = numeric(bench.rows[static_cast<size_t>(rows[i].bench)], kStatNorm);
            if (norm && std::isfinite(*norm) && std::fabs(*norm) > 0)
              ref_in = std::max(ref_in, residue_abs / std::fabs(*norm));
          }
          // Unrecorded code before a forward call's input is weighed with R,
          // its Sketch too: U is already the largest error anywhere upstream,
          // and 4R over it hid a softmax scale 9-22x above the clean noise
          // at o_proj's input (eager vs inductor, float32). A backward
          // call's gradients come through unrecorded backward code (the
          // sums over broadcast dimensions of every add and bias) that
          // amplifies their relative L2 error further: 4R for the Sketch.
          const double r_in = backward ? ratio_of(c) : ratio;
          if (exceeds(ec[i][c], r_in, ref_in, fl(i, c)) && ec[i][c] > best_in)
            best_in = ec[i][c], in_class = c, in.row[c] = i, in_reference = ref_in,
            in_scope = &u != &upstream ? std::optional<uint32_t>(scope_entry) : std::nullopt;
        }
      }
    }
    if (out_class >= 0) kinds |= kOutputCause;
    if (integer_output) kinds |= kIntegerOutput;
    if (in_class >= 0) kinds |= kUnrecordedInput;
    // Below every floor, in a pair that agrees bit for bit so far: named
    // when the same code turned equal inputs into equal results earlier in
    // this pair (bitwise_pair.h). The inputs first (code not recorded
    // before this call changed), then the outputs (this call did).
    // Once the pair stopped agreeing nothing here is asked again: no scan.
    bool entry_bitwise = bitwise_so_far && matched == end - begin;
    double bitwise_worst = 0;
    std::optional<size_t> bitwise_row;
    for (size_t i = begin; i < end && entry_bitwise; ++i) {
      const double e = rows[i].z ? (std::isinf(*rows[i].z) ? kInf : max2(ec[i])) : 0.0;
      if (e <= kBitwiseTolerance) continue;
      entry_bitwise = false;
    }
    // A parameter that differs at all is left to the parameter rules (drift
    // after an update is not a change of code).
    const bool parameters_bitwise = max2(par.e) <= kBitwiseTolerance && par.any_z() < kInf;
    std::optional<uint32_t> same_code_as;
    const uint64_t code = bitwise_so_far ? same_code.key(entry, begin, end) : 0;
    if (kinds == 0 && code != 0 && !entry_bitwise && parameters_bitwise && matched == end - begin)
      if (const auto it = reproduced.find(code); it != reproduced.end()) same_code_as = it->second;
    if (same_code_as) {
      for (const bool inputs : {true, false}) {
        for (size_t i = begin; i < end; ++i) {
          const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
          if ((t.role == Role::kInput) != inputs || parameter(i) || !rows[i].z) continue;
          const double e = max2(ec[i]);
          if (e > bitwise_worst) bitwise_worst = e, bitwise_row = i;
        }
        if (bitwise_row) break;
      }
      if (bitwise_row && bitwise_worst > kBitwiseMinimum && std::isfinite(bitwise_worst)) {
        const size_t i = *bitwise_row;
        int c = 0;
        for (int k : kClasses) if (ec[i][k] > ec[i][c]) c = k;
        if (target.rows[static_cast<size_t>(rows[i].target)].role == Role::kInput)
          kinds |= kUnrecordedInput, in_class = c, in.row[c] = i, best_in = ec[i][c], in_reference = 0;
        else
          kinds |= kOutputCause, out_class = c, out.row[c] = i, best_out = ec[i][c];
        kinds |= kBitwisePair;
      }
    }
    if (entry_bitwise && code != 0) reproduced.emplace(code, entry);
    if (!entry_bitwise) bitwise_so_far = false;
    // The same values recorded again (same_values.h): an output the bench
    // holds bit for bit as an earlier entry's output, where the target's
    // two records differ by more than 1e-6 -- this call changed, on the
    // target only, the value it returned (a module rounding its last
    // child's output). Whatever the floors: the bench says nothing may
    // change there.
    std::optional<size_t> same_as;
    RowError same_error;
    auto worst_of = [&](const RowError& e) { return e.hard.empty() ? max2(e.e_class) : kInf; };
    // Row i holds in the bench the same values as the earlier row j: the
    // target's error of i against j when it differs beyond 1e-6 and beyond
    // ulp_fraction of an ulp of its dtype (for an output 1/64: as one element
    // in 4096 moved by an ulp; for a gradient passed on 1/2, below).
    // Less is a sum whose tiny terms one side's rounding dropped and the
    // other's kept in a small element, not a change of the value: a clean
    // bfloat16 ELECTRA step -- the attention's input gradient, the value
    // path's plus query and key paths of ~1e-6, equal to the value path's
    // bit for bit in eager, 7.6e-6 apart from it under inductor (bfloat16's
    // 1/64 ulp: 1.2e-4; float32's stays under 1e-6).
    auto changed_on_target = [&](size_t i, size_t j, double ulp_fraction) -> std::optional<RowError> {
      const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
      const TensorRecord& bj = bench.rows[static_cast<size_t>(rows[j].bench)];
      if (!same_values(b, sketch_of(bench, b), bj, sketch_of(bench, bj))) return std::nullopt;
      const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
      const TensorRecord& tj = target.rows[static_cast<size_t>(rows[j].target)];
      if (t.dtype != tj.dtype || t.shape != tj.shape) return std::nullopt;
      RowError e = row_error(t, tj, scale, nullptr, sketch_of(target, t), sketch_of(target, tj), 0.0);
      if (!(worst_of(e) > std::max(kBitwiseMinimum, e.floor->element * ulp_fraction))) return std::nullopt;
      return e;
    };
    auto worst_class = [](const RowError& e) {
      int c = 0;
      for (int k : kClasses)
        if (e.e_class[k] > e.e_class[c]) c = k;
      return c;
    };
    if (kinds == 0)
      for (size_t i = begin; i < end; ++i) {
        if (!same_values_candidate(i)) continue;
        const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
        const auto it = earlier_outputs.find(values_hash(b, sketch_of(bench, b)));
        // Only a child's output (a module's or an API call's inside this
        // module): what a sibling returned may be changed on its way here
        // by code that is not recorded, which the rules above weigh.
        if (it == earlier_outputs.end() || it->second.second < children_from) continue;
        const size_t j = it->second.first;
        const auto e = changed_on_target(i, j, 1.0 / 64);
        if (e && (!same_as || worst_of(*e) > max2(same_error.e_class))) {
          same_as = j;
          same_error = *e;
          out_class = worst_class(*e);
          out.row[out_class] = i;
          best_out = worst_of(*e);
        }
      }
    if (same_as) kinds |= kOutputCause | kSameValues;
    // The same for the gradient a backward call receives: where the bench
    // holds it bit for bit as an earlier backward call's output (the same
    // gradient passed on: the residual add's gradient arriving at the
    // linear that produced its input), only unrecorded code between the two
    // can have changed the target's -- a backward-only gradient scale 1 %
    // under bfloat16 noise U of 2.3 % (a Llama under inductor), which no
    // floor separates from rounding. Beyond half an ulp of the dtype, not
    // 1/64: a compiled backward may compute one gradient in two kernels,
    // each rounding it to the dtype from its own float32 sum (a clean
    // bfloat16 RegNet and MobileNetV2 under inductor: a convolution's
    // input gradient 0.015-0.14 % apart from the block's that eager passes
    // on bit for bit).
    if (kinds == 0 && backward)
      for (size_t i = begin; i < end; ++i) {
        if (!rows[i].z || discrete[i] || parameter(i)) continue;
        const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
        const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
        if (t.role != Role::kInput || !t.is_tensor || !b.is_tensor || t.dtype != b.dtype) continue;
        const auto norm = numeric(b, kStatNorm);
        if (!norm || !(*norm > 0) || !std::isfinite(*norm)) continue;
        const auto it = earlier_outputs.find(values_hash(b, sketch_of(bench, b)));
        if (it == earlier_outputs.end()) continue;
        const size_t j = it->second.first;
        const uint32_t from = target.rows[static_cast<size_t>(rows[j].target)].entry;
        if (target.entries[from].find(".backward") == std::string::npos) continue;
        const auto e = changed_on_target(i, j, 0.5);
        if (e && (!same_as || worst_of(*e) > max2(same_error.e_class))) {
          same_as = j;
          same_error = *e;
          in_class = worst_class(*e);
          in.row[in_class] = i;
          best_in = worst_of(*e);
          in_reference = 0;
        }
      }
    if (same_as && !(kinds & kSameValues)) kinds |= kUnrecordedInput | kSameValues;
    if (!arguments.empty()) {
      if (tensor_outputs > 0 && !(kinds & (kOutputCause | kIntegerOutput))) {
        // The call was made with another argument and returned the same
        // data within every floor: the two programs call it differently to
        // one result (a clean bfloat16 Persimmon: SDPA with is_causal=True
        // in eager, an explicit causal mask and is_causal=False under
        // dynamo, outputs equal bit for bit). Said in the summary, not a
        // divergence; whatever else differs here is judged as before.
        for (const size_t i : arguments) {
          const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
          const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
          const std::string what = t.is_tensor ? "shape " + shape_str(t.shape) + " vs " + shape_str(b.shape)
                                               : stat_str(t, kStatMax) + " vs " + stat_str(b, kStatMax);
          result.arguments_without_effect.push_back(target.entries[entry] + " " + row_label(t, target.entries) +
                                                    ": " + what);
          result.argument_without_effect[i] = true;
        }
      } else {
        // What the call returned differs (or cannot be seen): the argument
        // it was called with is the cause, named as an input that changed
        // in code that is not recorded.
        kinds &= static_cast<uint8_t>(~(kOutputCause | kIntegerOutput | kSameValues | kBitwisePair));
        kinds |= kUnrecordedInput;
        in_class = kAggregateClass;
        in.row[in_class] = arguments.front();
        best_in = kInf;
        in_reference = 0;
      }
    }
    if (kinds == 0) {
      // An integer/bool record differs (explained by the inputs' rounding,
      // or by such a change upstream).
      bool changed = false, output_changed = false;
      for (size_t i = begin; i < end; ++i) {
        if (!rows[i].z) continue;
        if (argument_differs(i)) continue;
        if (discrete[i] || shape_follows_changed_input(i)) {
          const bool output = target.rows[static_cast<size_t>(rows[i].target)].role == Role::kOutput;
          changed = changed || *rows[i].z > 0;
          output_changed = output_changed || (output && *rows[i].z > 0);
          continue;
        }
        for (int c : kClasses) upstream[c] = std::max(upstream[c], ec[i][c]);
        if (drifting[i] && parameter(i)) drift_sketch = std::max(drift_sketch, ec[i][kSketchClass]);
        if (!unused_running[i]) seen.max_z = std::max(seen.max_z, *rows[i].z);
        if (backward && result.produced_from_rms[i] > 0) residue_abs = std::max(residue_abs, residue_error(i));
      }
      discrete_output_differed = discrete_output_differed || output_changed;
      if (has_discrete_output && !inputs_within_floor) discrete_may_differ = true;
      for (size_t i = begin; i < end; ++i)
        if (same_values_candidate(i)) {
          const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
          earlier_outputs.try_emplace(values_hash(b, sketch_of(bench, b)), i, walked_path.size() - 1);
        }
      seen.max_e = std::max(seen.max_e, max2(upstream));
      seen.rows += matched;
      // An entry whose integer records changed is not "agreeing", even when
      // its inputs explain the change.
      if (!changed) {
        last_matched = entry;
        unmatched_since.clear();
        changed_since.clear();
      } else {
        changed_since.push_back(entry);
      }
      continue;
    }
    Divergence d;
    d.entry = entry;
    d.kinds = kinds;
    // A parameter cause is decided on Max/Min/Mean/Norm (cause_z), or its
    // Sketch where the first update's rule named it (parameter_z): its worse class.
    int par_class = zc[par_row][kExtremeClass] > zc[par_row][kAggregateClass] ? kExtremeClass : kAggregateClass;
    if (parameter_z(par_row) > cause_z(zc[par_row])) par_class = kSketchClass;
    const int cls = (kinds & kParameterCause) ? par_class : (kinds & kOutputCause) ? out_class : in_class;
    d.row = (kinds & kParameterCause) ? par_row : (kinds & kOutputCause) ? out.row[cls] : in.row[cls];
    d.z_inputs = in.any_z();
    d.z_parameters = par.any_z();
    d.z_outputs = std::max(out.any_z(), out_discrete.any_z());
    d.parameter_rows = params;
    d.parameter_rows_differing = params_differing;
    // "Throughout": at least half of them, and more than one (a model with a
    // single parameter row says nothing about drift).
    d.parameters_throughout = (kinds & kParameterCause) && params_differing >= 2 && params_differing * 2 >= params;
    const auto& cols = target.entries;
    auto label = [&](size_t i) { return row_label(target.rows[static_cast<size_t>(rows[i].target)], cols); };
    d.error = row_error_of(result, d.row);
    // The statistic shown is the worst of the class that decided.
    if (d.error.hard.empty() && cls >= 0) d.error.worst_stat = worst_in_class(d.error, cls, scale);
    std::string msg;
    auto add = [&msg](const std::string& part) { msg += (msg.empty() ? "" : "; ") + part; };
    if (kinds & kParameterCause) {
      const RowError pe = row_error_of(result, par_row);
      std::string what = label(par_row);
      if (const int64_t p = result.parameter_of[par_row]; p >= 0) {
        const TensorRecord& pr = target.rows[static_cast<size_t>(rows[static_cast<size_t>(p)].target)];
        what += " (" + label(static_cast<size_t>(p)) + " of " + cols[pr.entry] + ")";
      }
      std::string m = what + " differs: " + error_text(pe, par_class, scale) +
                      "; nothing recorded produced it";
      if (!update_differs.empty())
        m += "; after the first update " + std::to_string(result.update_rows_beyond) + " of " +
             std::to_string(result.update_rows_judged) +
             " parameter rows judged are further apart than their gradients' rounding at step 0 explains: the "
             "update itself differs (the optimizer step, or code run between the steps)";
      else if (d.parameters_throughout)
        m += "; the parameters differ throughout (" + std::to_string(params_differing) + " of " +
             std::to_string(params) +
             " parameter rows beyond the floor): the divergence started in an earlier step's update, or the "
             "loaded weights differ";
      add(m);
    }
    if (kinds & kIntegerOutput) {
      std::string m = label(out.row[out_class]) + ": integer output changed (" +
                      error_text(row_error_of(result, out.row[out_class]), out_class, scale) + "); " +
                      (inputs_exact ? "its inputs agree exactly" : "its inputs agree to float32 rounding (1e-6)");
      add(m);
    } else if ((kinds & kSameValues) && (kinds & kOutputCause)) {
      const size_t i = out.row[out_class];
      add(label(i) + " holds in the bench the same values as " + label(*same_as) + " of " +
          cols[target.rows[static_cast<size_t>(rows[*same_as].target)].entry] +
          " (dtype, shape, statistics and Sketch bit for bit: the same tensor returned again); in the target the two "
          "differ (" + error_text(same_error, out_class, scale) + "): this call changed the value on the target only");
    } else if (kinds & kOutputCause) {
      const double explained =
          std::max({in_own[out_class], max2(par.e), children[out_class], from_forward[out_class]}), e = best_out;
      std::string m = label(out.row[out_class]) + ": " +
                      error_text(row_error_of(result, out.row[out_class]), out_class, scale) + ", ";
      if (inputs_unknown && explained > 0) m += times(e / explained) + " anything recorded before it (its inputs are recorded on one side only)";
      else if (in.any_z() == 0 && par.any_z() == 0 && explained == 0) m += "while its inputs agree exactly";
      else if (explained == 0)
        m += out_class == kAggregateClass ? "while its inputs' Means and Norms agree exactly"
             : out_class == kExtremeClass ? "while its inputs' Max and Min agree exactly"
                                          : "while its inputs' Sketches agree exactly";
      else m += std::isinf(e) ? "beyond its inputs'" : times(e / explained) + " its inputs'";
      add(m);
    }
    if ((kinds & kUnrecordedInput) && (kinds & kSameValues)) {
      d.last_agreeing = last_matched;
      d.unmatched_between = unmatched_since;
      const size_t i = in.row[in_class];
      add(label(i) + " holds in the bench the same values as " + label(*same_as) + " of " +
          cols[target.rows[static_cast<size_t>(rows[*same_as].target)].entry] +
          " (dtype, shape, statistics and Sketch bit for bit: the same gradient passed on); in the target the two "
          "differ (" + error_text(same_error, in_class, scale) + "): code that is not recorded between the two "
          "changed it on the target only");
    } else if (kinds & kUnrecordedInput) {
      d.last_agreeing = last_matched;
      d.unmatched_between = unmatched_since;
      const double e = best_in, before = in_reference;
      std::string m = label(in.row[in_class]) + ": " + error_text(row_error_of(result, in.row[in_class]), in_class, scale);
      if (!last_matched && unmatched_since.empty()) {
        m += ": the model's inputs already differ";
      } else {
        if (before > 0 && std::isfinite(e))
          m += ", " + times(e / before) +
               (in_scope ? " what " + cols[*in_scope] + " received and computed before it"
                         : std::string(" anything recorded before it"));
        m += ": the error came from code that is not recorded";
        if (last_matched) m += " between " + cols[*last_matched] + " (the last agreeing record) and this call";
        else m += " before this call";
        if (!unmatched_since.empty())
          m += " (or from a call recorded on one side only: " + entry_list(target, unmatched_since) + ")";
        if (!changed_since.empty())
          m += "; after it, integer records of " + entry_list(target, changed_since) +
               " changed with their inputs' rounding";
      }
      add(m);
    }
    // Said whatever else holds, and as a condition: the dump cannot tell
    // other draws from a fault of the entry (a dropout whose compiled scale
    // is wrong); past other draws nothing after it can be judged either.
    // A backward reuses the forward's draws (dropout's mask): not said there.
    if ((kinds & kOutputCause) && !(kinds & kParameterCause) && !backward && draws_random(cols[entry])) {
      d.kinds = static_cast<uint8_t>(kinds | kRandom);
      add(std::string(split_module_entry(cols[entry]).class_name.empty() ? "this API" : "this module") +
          " draws random numbers: unless both runs drew the same ones (the same seed, and for inductor "
          "torch._inductor.config.fallback_random = True: it generates its own), they differ from here on whatever "
          "the compute does, and a fault here cannot be told from the draw; record both runs so, or in eval mode, "
          "to tell");
    }
    if (kinds & kBitwisePair)
      add("every record before it agrees bit for bit, and the same code turned equal inputs into equal results at " +
          cols[*same_code_as] + " (the pair runs the same kernels: any difference is a change, whatever the floor)");
    d.message = std::move(msg);
    for (size_t i = begin; i < end; ++i) rows[i].first_divergence = true;
    seen.upstream = true;
    result.first_divergence = entry;
    result.divergence = std::move(d);
    break;
  }
  if (!result.divergence) {
    // The noise over every matched row (an entry's error can stay explained).
    seen = {};
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].z || discrete[i] || result.argument_without_effect[i] || unused_running[i]) continue;
      seen.max_z = std::max(seen.max_z, *rows[i].z);
      seen.max_e = std::max(seen.max_e, max2(ec[i]));
      ++seen.rows;
    }
  }
  result.noise = seen;
}

void measure_coverage(CompareResult& result) {
  Coverage& c = result.coverage;
  c = {};
  c.target_entries = static_cast<int64_t>(result.target.entries.size());
  c.bench_entries = static_cast<int64_t>(result.bench.entries.size());
  c.target_rows = static_cast<int64_t>(result.target.rows.size());
  c.bench_rows = static_cast<int64_t>(result.bench.rows.size());
  for (const CompareRow& r : result.rows) c.matched_rows += r.match == MatchKind::kMatched;
  auto counts = [&c]() {
    return "(target: " + std::to_string(c.target_entries) + " entries, " + std::to_string(c.target_rows) +
           " rows; bench: " + std::to_string(c.bench_entries) + " entries, " + std::to_string(c.bench_rows) + " rows)";
  };
  if (c.target_entries == 0 && c.bench_entries == 0) {
    c.problem = "both sides recorded nothing " + counts();
  } else if (c.target_entries == 0 || c.bench_entries == 0) {
    c.problem = std::string("the ") + (c.target_entries == 0 ? "target" : "bench") + " recorded nothing " + counts();
  } else if (c.matched_rows * 2 < std::max(c.target_rows, c.bench_rows)) {
    const bool target_short = c.target_rows < c.bench_rows;
    std::string side = c.target_rows == c.bench_rows ? "neither side is shorter, but " : std::string("the ") +
                       (target_short ? "target" : "bench") + " is short: ";
    c.problem = side + "only " + std::to_string(c.matched_rows) + " of the " +
                std::to_string(std::max(c.target_rows, c.bench_rows)) + " rows of the larger side are matched " +
                counts();
  }
}

}  // namespace graphprobe::compare
