#pragma once
// Single-pass statistics over a CPU tensor, computed straight into a record
// table's Row (record/row.h), as the CUDA kernels write theirs.

#include <ATen/core/Tensor.h>

#include "record/row.h"

namespace graphprobe {

// A row holding only statistics (the bookkeeping columns 0): what every CPU
// reduction returns. The NaN count is a double like every column; counts stay
// exact (below 2^53).
inline Row stats_row(double max, double min, double sum, double sumsq, double nan_count) {
  Row r{};
  r.v[column::kMax] = max;
  r.v[column::kMin] = min;
  r.v[column::kSum] = sum;
  r.v[column::kSumSq] = sumsq;
  r.v[column::kNanCount] = nan_count;
  return r;
}

// Reads every element once, in place (strided tensors too), on torch's
// intra-op threads for large tensors, and returns the statistic columns of
// a row (column::kMax .. column::kNanCount; the others 0). Integers, float64
// and float8 accumulate in double; float32, bfloat16 and float16 in float32
// per short block and in double across blocks (stats_cpu_simd.h). Chunks are
// combined in a fixed order, so the result does not depend on the thread
// count. NaN elements are counted and left out of max/min (the caller turns
// a non-zero count into NaN stats, as torch.max would).
Row compute_stats_cpu(const at::Tensor& x);

}  // namespace graphprobe
