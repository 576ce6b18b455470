#pragma once
// Parameters across the steps of a training run (docs/formats.md,
// "Parameters after an update"). From step 2 on, eager's and compiled
// parameters differ by what every earlier update carried into them; one pair
// cannot tell that drift from a weight changed between steps (a nudge, a
// flipped bit, a wrong optimizer step). The step before can: a parameter
// that differed there already, or whose gradient did, carries that
// difference on; one that agreed with its gradient there and differs now was
// changed by something other than the update. The runner compares step N
// again with step N-1's differing parameters (CompareOptions::
// carried_parameters) when step N names a parameter. Torch-free.

#include <array>
#include <string>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// A parameter's name across steps and records: its module's path and its
// own name ("decoder.layers.0.self_attn_layer_norm.bias"), from a parameter
// row ({module entry}.parameters.{name}) or a parameter-gradient record
// ({module}.parameters_grad.{n}.{name}.{k}); "" for every other row.
std::string parameter_key(const TensorRecord& t, const std::vector<std::string>& entries);

// The keys, sorted and unique, of the parameters of a pair whose parameter
// row (Max, Min, Mean or Norm) or gradient record (any statistic) is beyond
// its floor: zc[i] the row's z per class (first_divergence.cpp).
std::vector<std::string> differing_parameters(const CompareResult& result, const std::vector<ClassZ>& zc);

// What a pair offers the step after it for the first update's rule, sorted
// by key: each parameter with a matched parameter row holding a Sketch on
// the bench (its first call's) and a matched gradient record with a Sketch
// on both sides (their relative L2 error by the Sketch, the largest over
// the parameter's gradient records).
std::vector<UpdateBasis> parameter_basis(const CompareResult& result);

// The first update's rule (docs/formats.md, "Parameters after an update").
// At step 1 the two sides' parameters differ by what the first update left:
// Adam's first step moves every element by about lr times the sign of its
// gradient, so an element whose gradient is within its rounding of zero may
// move the other way on the other side (2 lr apart), and the others move
// alike. With a fraction q of the elements flipped the parameters are
// 2 sqrt(q) of the update apart in L2, and q is about the gradients'
// relative error e (a smooth density of gradients near zero): the bound is
// kUpdateFlipMargin sqrt(e) times the update, plus the Sketch floor of the
// parameter's dtype times its Norm (the update's own rounding). An
// optimizer step that differs (a scaled update, a wrong learning rate, a
// fused kernel off) moves every parameter beyond it; a gradient that is
// rounding residue (e ~ 1) or holds a residue part (a fused QKV bias whose
// key third softmax ignores) moves one parameter beyond it -- which is why
// the rule names parameters only where at least half of those it could
// judge are beyond (first_divergence.cpp).
constexpr double kUpdateFlipMargin = 4.0;

struct UpdateJudgment {
  bool judged = false;  // the bound is below the update (e < 1/16) and the update is not 0
  bool beyond = false;
};
UpdateJudgment first_update_beyond(const UpdateBasis& before, const std::array<double, 4>& target_after,
                                   const std::array<double, 4>& bench_after, double floor_abs);

}  // namespace graphprobe::compare
