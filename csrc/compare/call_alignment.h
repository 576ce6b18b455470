#pragma once
// Calls of one API or module paired by their order, dtypes and shapes where
// the two programs make a different number of them. Torch-free.
//
// Exact matching pairs "Tensor.__add__.7.forward" with the bench's call 7.
// A program that makes one more call of an API before it shifts every later
// call of that API by one, and each pair then holds two different tensors:
// a first divergence "beyond the floor" in a clean pair. transformers does
// this itself: under torch.compile BioGPT builds its attention mask with an
// __add__, a masked_fill, a to and an __imul__ that eager mode skips, so in
// a clean bfloat16 mix training step every later Tensor.__add__ was paired
// with the bench's next one, and the embeddings' sum was named.
//
// Where a call's rows are left unpaired on either side and its API (its
// entry name without the call index, forward and backward apart) is called
// a different number of times on the two sides, the API's calls are
// aligned in dump order instead: a target call is paired with the next
// bench call whose records have the same parts, dtypes (as exact matching
// pairs them) and shapes, skipping at most as many calls as the two counts
// differ by, plus one (64 at most). Where these pairs hold more records alike
// (part, dtype, shape) than the exact ones, they replace them for that API,
// and a note names it. Nothing changes where every row found its partner.
//
// Calls alike in parts, dtypes and shapes are paired in order: an extra call
// just like the others (one more residual __add__ of the same shape) still
// shifts the pairs after it.

#include <string>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// `rows`: match_rows' target rows in target order (bench rows paired or
// kTargetOnly); `bench_used` marks the bench rows paired. Both are updated.
// One note per API re-paired goes to `notes` (the first few, then a count).
void align_unpaired_calls(const Dump& target, const Dump& bench, std::vector<CompareRow>& rows,
                          std::vector<bool>& bench_used, std::vector<std::string>* notes);

}  // namespace graphprobe::compare
