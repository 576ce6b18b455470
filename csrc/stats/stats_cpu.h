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

// Reads every element once, in place (strided tensors too), accumulating in
// double. NaN elements are counted and left out of max/min (the caller turns
// a non-zero count into NaN stats, as torch.max would).
Stats compute_stats_cpu(const at::Tensor& x);

}  // namespace graphprobe
