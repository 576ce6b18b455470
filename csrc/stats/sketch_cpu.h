#pragma once
// The Sketch statistic (stats/sketch.h) of a CPU tensor.

#include <ATen/core/Tensor.h>

#include <array>

#include "stats/sketch.h"

namespace graphprobe::sketch {

// The kProjections signed sums of x's elements in row-major order,
// accumulated in double. Floating types only: for other types (integers,
// bool, complex) and empty tensors every value is NaN, which the writer
// leaves out of dump.json. Large tensors are summed on torch's intra-op
// threads in chunks combined in a fixed order, so the value does not depend
// on the thread count.
std::array<double, kProjections> sketch_cpu(const at::Tensor& x);

}  // namespace graphprobe::sketch
