#pragma once
// Single-pass statistics over a CPU tensor.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace graphprobe {

struct Stats {
  double max;
  double min;
  double sum;
  double sumsq;
  int64_t nan_count;
};

// Reads every element once, in place (strided tensors too), on torch's
// intra-op threads for large tensors. Integers, float64 and float8 accumulate
// in double; float32, bfloat16 and float16 in float32 per short block and in
// double across blocks (stats_cpu_simd.h). Chunks are combined in a fixed
// order, so the result does not depend on the thread count. NaN elements are
// counted and left out of max/min (the caller turns a non-zero count into NaN
// stats, as torch.max would).
Stats compute_stats_cpu(const at::Tensor& x);

}  // namespace graphprobe
