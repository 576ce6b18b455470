#pragma once
// Pairs target rows with bench rows. Torch-free.
//
// Exact mode (msprobe's): by row name, with backward calls renumbered in
// dump order as msprobe does (see exact_entry_keys in matching.cpp); rows
// whose dtypes differ (other than float16/bfloat16/float32/float64 among
// themselves) are not paired, as in msprobe. Fuzzy mode: by the name with the call
// index removed from the entry ("Module.fc.Linear.forward.3" ->
// "Module.fc.Linear.forward", "Torch.matmul.2.forward" ->
// "Torch.matmul.forward"), the k-th occurrence on one side paired with the
// k-th on the other. This survives runs whose call counts drift (an extra
// warm-up call, a module called from a different place) as long as the
// order of calls of each module is the same.
//
// In exact mode, the calls of an API or module whose rows were left
// unpaired are aligned by their records instead (call_alignment.h), with a
// note in `notes`.
//
// The result lists target rows in target order, then bench-only rows in
// bench order. A name repeated on one side (a malformed dump) pairs its
// first occurrence; the rest are unmatched.

#include <string>
#include <string_view>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// A call index: one or more ASCII digits.
bool all_digits(std::string_view s);

// The entry name without its call index; unchanged when it has none.
std::string strip_call_index(std::string_view entry);

std::vector<CompareRow> match_rows(const Dump& target, const Dump& bench, bool fuzzy,
                                   std::vector<std::string>* notes = nullptr);

// msprobe pairs rows of equal dtype, or both of the float dtypes
// (gen_dtype_condition); other rows are left without a bench.
bool dtypes_pair(const std::string& t, const std::string& b);

}  // namespace graphprobe::compare
