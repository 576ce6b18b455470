#pragma once
// One comparison: two dump.json -> rows, verdicts, first divergence.
// Torch-free; the Python binding and the C++ tests call only this.

#include <string>

#include "compare/result.h"

namespace graphprobe::compare {

CompareResult compare_dumps(Dump target, Dump bench, const CompareOptions& options);

// Tensor mode, after the caller stored each matched row's TensorMetrics:
// applies the tensor rules -- with TensorLayout::kMsprobe msprobe's real-data
// rules in place of the statistics ones (verdicts.h), otherwise the
// statistics rules plus tensor_verdicts.h -- then finds the first
// divergence again (on the statistics, as before) and recounts
// the verdicts. Sets result.tensor_mode, so the CSV gets the tensor columns.
// Call once per result.
void finish_tensor_compare(CompareResult& result, const CompareOptions& options);

// Throws DumpFormatError for malformed files, fs::IoError for unreadable ones.
CompareResult compare_files(const std::string& target_path, const std::string& bench_path,
                            const CompareOptions& options);

}  // namespace graphprobe::compare
