#pragma once
// The compare_result CSV. Torch-free.
//
// Columns, tensor dumps in the default layout (TensorLayout::kMsprobe):
// exactly msprobe's real-data list (COMPARE_RESULT_HEADER + Data_name), in
// its order: the metric columns hold msprobe's words where it writes words
// ("unsupported", "shape unmatched", "N/A", "Nan"), Data_name the Python
// list ['target file', 'bench file']; then ours (Match, First Divergence).
// Statistics dumps, and tensor dumps in TensorLayout::kStatisticsPlusTensor:
// exactly msprobe's statistics-mode list, in its order; in tensor
// mode (result.tensor_mode) msprobe's real-data columns after them (Cosine,
// EucDist, MaxAbsErr, Tensor MaxRelativeErr, One Thousandth Err Ratio, Five
// Thousandths Err Ratio; "Tensor MaxRelativeErr" because the statistics
// columns already hold a "MaxRelativeErr"); then ours (Match, First
// Divergence). Tools reading msprobe's statistics columns by name or by
// position keep working.
// Cell formats: numbers in the shortest form that reads back to the same
// double, "nan"/"inf"/"-inf" for non-finite ones; relative errors as
// "12.5%" (msprobe's form), but "inf" and "nan" without the sign; "N/A"
// where a value does not exist (a statistic the dump left null, the other
// side of an unmatched row); booleans as True/False; shapes as [2, 8];
// Err_message a JSON list of reasons. Tensor metrics are plain numbers
// (MaxRelativeErr and the ratios too, as msprobe writes them), "nan" where
// undefined, "N/A" where not computed. Quoting per RFC 4180.
// Text read from the dumps (names, dtypes, the text value of a non-tensor
// argument in the statistics columns) that a spreadsheet would take for
// a formula -- it starts with = + - @ tab or CR -- gets a leading ' (OWASP's
// advice against CSV injection); numbers are never touched. A NUL in such
// text is written as the six characters \u0000, as dump.json spells it.

#include <string>
#include <string_view>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

const std::vector<std::string>& csv_header(bool tensor_columns = false, TensorLayout layout = TensorLayout::kMsprobe);
std::string csv_field(std::string_view s);
// `s` with a leading ' when it starts with a formula character, NUL as \u0000.
std::string csv_text(std::string_view s);
std::string render_csv(const CompareResult& result);
// Written through fs::AtomicFile, a few thousand rows at a time: readers
// never see half a file, and the text of the whole CSV is never in memory.
void write_csv(const CompareResult& result, const std::string& path);

}  // namespace graphprobe::compare
