#pragma once
// How the compare writes numbers and shapes in CSV cells and messages: the
// text side of a record, apart from reading it (dump_reader.h). Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "compare/dump_reader.h"

namespace graphprobe::compare {

// "1.5" -> "1.5", used in messages; shortest round-trip, nan/inf lower-case.
std::string format_number(double v);
// The same text appended to `out`: the CSV writes a dozen numbers a row,
// most longer than a std::string holds without allocating.
void append_number(std::string& out, double v);

// [2, 8, 64], as msprobe writes shapes in its CSV and messages.
std::string shape_str(const std::vector<int64_t>& s);
void append_shape(std::string& out, const std::vector<int64_t>& s);

// The record's shape as msprobe shows it: shape_text when set, else shape_str.
std::string shape_of(const TensorRecord& r);

}  // namespace graphprobe::compare
