#pragma once
// Walks two same-shaped CPU tensors element by element. Torch-backed.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace graphprobe::compare_tensors {

// Calls f(target element, bench element) for every element, in row-major
// order, until f returns false. Walks the strides itself: no ATen op (such
// as contiguous()) runs here, because an intra-op parallel op in a process
// forked from one that already used torch's OpenMP pool can deadlock, and
// `graphprobe compare` runs pairs in forked workers.
template <typename T, typename F>
void for_each_pair(const at::Tensor& t, const at::Tensor& b, F&& f) {
  // The untyped pointer (storage offset applied): the typed accessor is not
  // instantiated in libtorch for every dtype read here (float8, uint16-64).
  const T* pt = static_cast<const T*>(t.const_data_ptr());
  const T* pb = static_cast<const T*>(b.const_data_ptr());
  const int64_t n = t.numel();
  if (t.is_contiguous() && b.is_contiguous()) {
    for (int64_t i = 0; i < n; ++i)
      if (!f(pt[i], pb[i])) return;
    return;
  }
  // Non-contiguous (dim >= 1): innermost dimension in a plain loop, the
  // others advanced like an odometer.
  const at::IntArrayRef sizes = t.sizes(), st = t.strides(), sb = b.strides();
  const int64_t dim = t.dim();
  const int64_t inner = sizes[dim - 1], st_in = st[dim - 1], sb_in = sb[dim - 1];
  std::vector<int64_t> index(static_cast<size_t>(dim), 0);
  for (;;) {
    for (int64_t j = 0; j < inner; ++j)
      if (!f(pt[j * st_in], pb[j * sb_in])) return;
    int64_t d = dim - 2;
    for (; d >= 0; --d) {
      if (++index[static_cast<size_t>(d)] < sizes[d]) {
        pt += st[d];
        pb += sb[d];
        break;
      }
      pt -= st[d] * (sizes[d] - 1);
      pb -= sb[d] * (sizes[d] - 1);
      index[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace graphprobe::compare_tensors
