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
std::string shape_str(const Shape& s);
void append_shape(std::string& out, const Shape& s);

// The record's shape as msprobe shows it: shape_text when set, else shape_str.
std::string shape_of(const TensorRecord& r);
// shape_of(a) == shape_of(b), without spelling out either shape when
// neither has a shape text (shape_str writes distinct sizes distinctly):
// checked for every matched row by the verdicts and the first divergence,
// where building two strings a row was ~2 % of a compare.
bool same_shape(const TensorRecord& a, const TensorRecord& b);
// shape_of(r) == "[]" (a 0-d tensor or a value), without spelling it out.
bool shape_is_scalar(const TensorRecord& r);

}  // namespace graphprobe::compare
