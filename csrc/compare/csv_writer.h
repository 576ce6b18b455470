#pragma once
// The compare_result CSV. Torch-free.
//
// Columns: exactly msprobe's statistics-mode list, in its order, then ours
// appended at the end (Match, First Divergence) so that tools reading
// msprobe's columns by name or by position keep working.
// Cell formats: numbers in the shortest form that reads back to the same
// double, "nan"/"inf"/"-inf" for non-finite ones; relative errors as
// "12.5%" (msprobe's form), but "inf" and "nan" without the sign; "N/A"
// where a value does not exist (a statistic the dump left null, the other
// side of an unmatched row); booleans as True/False; shapes as [2, 8];
// Err_message a JSON list of reasons. Quoting per RFC 4180.

#include <string>
#include <string_view>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

const std::vector<std::string>& csv_header();
std::string csv_field(std::string_view s);
std::string render_csv(const CompareResult& result);
// Written through fs::write_file_atomic: readers never see half a file.
void write_csv(const CompareResult& result, const std::string& path);

}  // namespace graphprobe::compare
