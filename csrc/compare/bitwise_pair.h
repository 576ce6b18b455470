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

#include <cstdint>
#include <string>
#include <unordered_map>
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

// The key under which an entry counts as "the same code" as another: a
// module's name with its layer indices and call counter made "*"
// ("Module.layers.*.mlp.MLP.forward.*"); an API call's name so made, with
// the module it completes in front of (the next module entry in dump order,
// so made) and its rank among the calls of that name since the module
// before; then the dtype and shape of every record of the entry -- as a
// 64-bit hash (two different keys share one with odds of 2^-64 per pair).
// Asked entry by entry in dump order, and only while the pair agrees bit
// for bit: a pair that stops agreeing at its first fused kernel costs one
// key. 0 for entries the rule leaves alone: backward calls (atomics make
// many of them differ run to run) and parameters_grad entries.
class SameCodeKeys {
 public:
  SameCodeKeys(const Dump& target, const std::vector<CompareRow>& rows) : target_(target), rows_(rows) {}
  // The key of `entry`, whose rows are rows[begin, end); entries in
  // increasing order.
  uint64_t key(uint32_t entry, size_t begin, size_t end);

 private:
  const Dump& target_;
  const std::vector<CompareRow>& rows_;
  size_t counted_ = 0;      // entries before this one are in rank_
  size_t next_module_ = 0;  // the first module entry at or after counted_ (or entries.size())
  std::unordered_map<std::string, int> rank_;  // calls per name since the last module entry
};

}  // namespace graphprobe::compare
