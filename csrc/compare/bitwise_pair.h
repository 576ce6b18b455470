#pragma once
// A pair that agrees bit for bit (docs/formats.md, "A pair that agrees bit
// for bit"). The noise floors are what two correct runs may differ by when
// they run different kernels (a fused inductor kernel against eager's). Two
// runs of the same kernels -- a CUDA graph replaying eager's launches,
// aot_eager, a compile that reorders nothing -- differ by nothing at all: a
// bfloat16 softmax scaled by 1.01 then moves o_proj's input by 0.03 %, a
// tenth of the bfloat16 floor, and no floor can name it without calling
// every fused kernel's rounding a fault. The pair itself says which case it
// is: while every record so far agrees bit for bit, and the same code (the
// same module of another layer, the same call at the same place) already
// turned equal inputs into equal results in this pair, a difference is a
// change, whatever its size. Torch-free.

#include <string>
#include <utility>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// Relative error up to which a matched row holds the same values: what the
// statistics' own float64 arithmetic moves for bit-identical data summed in
// another order (a view's strides, the CUDA kernel's per-block atomics).
constexpr double kBitwiseTolerance = 1e-12;
// The least relative error the rule names: above what the statistics'
// arithmetic can make of bit-identical data on any device path (the CUDA
// kernel sums each 16-byte vector in float32 first: up to ~6e-7 of the
// squares, where the vectors start at another alignment).
constexpr double kBitwiseMinimum = 1e-6;

// Per range of entry_ranges(): the key under which the entry counts as "the
// same code" as another -- a module's name with its layer indices and call
// counter made "*" ("Module.layers.*.mlp.MLP.forward.*"); an API call's name
// so made, with the module it completes in front of (the next module entry
// in dump order, so made) and its rank among the calls of that name since
// the module before; then the dtype and shape of every record of the entry.
// "" for entries the rule leaves alone: backward calls (atomics make many
// of them differ run to run) and parameters_grad entries.
std::vector<std::string> same_code_keys(const Dump& target, const std::vector<CompareRow>& rows,
                                        const std::vector<std::pair<size_t, size_t>>& ranges);

}  // namespace graphprobe::compare
