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

}  // namespace graphprobe::compare
