#include "stats/stats_cpu.h"

#include "stats/reducible_types.h"
#include "stats/stats_cpu_simd.h"

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace graphprobe {
namespace {

using column::kMax;
using column::kMin;
using column::kNanCount;
using column::kSum;
using column::kSumSq;

Row identity() {
  return stats_row(-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), 0.0, 0.0, 0.0);
}

Row combine(const Row& a, const Row& b) {
  return stats_row(std::max(a.v[kMax], b.v[kMax]), std::min(a.v[kMin], b.v[kMin]), a.v[kSum] + b.v[kSum],
                   a.v[kSumSq] + b.v[kSumSq], a.v[kNanCount] + b.v[kNanCount]);
}

template <typename scalar_t>
Row reduce_portable(const scalar_t* data, int64_t begin, int64_t end) {
  // Four independent lanes let the compiler keep several additions in flight;
  // comparisons written as selects skip NaN (a NaN compares false) without a
  // branch, and NaNs are counted separately.
  double mx[4], mn[4], s[4] = {0, 0, 0, 0}, sq[4] = {0, 0, 0, 0};
  int64_t nan[4] = {0, 0, 0, 0};
  for (int l = 0; l < 4; ++l) {
    mx[l] = -std::numeric_limits<double>::infinity();
    mn[l] = std::numeric_limits<double>::infinity();
  }
  int64_t i = begin;
  for (; i + 4 <= end; i += 4) {
    for (int l = 0; l < 4; ++l) {
      const double v = static_cast<double>(static_cast<float>(data[i + l]));
      mx[l] = v > mx[l] ? v : mx[l];
      mn[l] = v < mn[l] ? v : mn[l];
      nan[l] += (v != v);
      s[l] += v;
      sq[l] += v * v;
    }
  }
  for (; i < end; ++i) {
    const double v = static_cast<double>(static_cast<float>(data[i]));
    mx[0] = v > mx[0] ? v : mx[0];
    mn[0] = v < mn[0] ? v : mn[0];
    nan[0] += (v != v);
    s[0] += v;
    sq[0] += v * v;
  }
  Row out = identity();
  for (int l = 0; l < 4; ++l) out = combine(out, stats_row(mx[l], mn[l], s[l], sq[l], static_cast<double>(nan[l])));
  return out;
}

template <typename I>
Row reduce_integral(const I* data, int64_t begin, int64_t end);

// Integers (bool included) convert to double directly: through float,
// 32- and 64-bit values would lose digits. Floating types of at most 32 bits
// (float8 included) convert through float, exactly.
template <typename scalar_t>
Row reduce_range(const scalar_t* data, int64_t begin, int64_t end) {
  if constexpr (std::is_integral_v<scalar_t>) {
    return reduce_integral(data, begin, end);
  } else {
    return reduce_portable(data, begin, end);
  }
}

// 64-bit integers and doubles must not pass through float.
template <>
Row reduce_range<double>(const double* data, int64_t begin, int64_t end) {
  double mx = -std::numeric_limits<double>::infinity(), mn = std::numeric_limits<double>::infinity();
  double s = 0, sq = 0;
  int64_t nan = 0;
  for (int64_t i = begin; i < end; ++i) {
    const double v = data[i];
    mx = v > mx ? v : mx;
    mn = v < mn ? v : mn;
    nan += (v != v);
    s += v;
    sq += v * v;
  }
  return stats_row(mx, mn, s, sq, static_cast<double>(nan));
}

template <typename I>
Row reduce_integral(const I* data, int64_t begin, int64_t end) {
  double mx = -std::numeric_limits<double>::infinity(), mn = std::numeric_limits<double>::infinity();
  double s = 0, sq = 0;
  for (int64_t i = begin; i < end; ++i) {
    const double v = static_cast<double>(data[i]);
    mx = std::max(mx, v);
    mn = std::min(mn, v);
    s += v;
    sq += v * v;
  }
  return stats_row(mx, mn, s, sq, 0.0);
}

// float32, bfloat16 and float16 take the vectorised kernels where the CPU has
// them (stats_cpu_simd.h).
template <>
Row reduce_range<float>(const float* data, int64_t begin, int64_t end) {
  if (simd::available()) return simd::reduce_f32(data + begin, end - begin);
  return reduce_portable(data, begin, end);
}
template <>
Row reduce_range<c10::BFloat16>(const c10::BFloat16* data, int64_t begin, int64_t end) {
  if (simd::available()) return simd::reduce_bf16(reinterpret_cast<const uint16_t*>(data + begin), end - begin);
  return reduce_portable(data, begin, end);
}
template <>
Row reduce_range<c10::Half>(const c10::Half* data, int64_t begin, int64_t end) {
  if (simd::available()) return simd::reduce_f16(reinterpret_cast<const uint16_t*>(data + begin), end - begin);
  return reduce_portable(data, begin, end);
}


// Splits [0, n) into chunks of kChunk elements, reduces each chunk on one
// thread and combines the chunks in index order: the grouping of the double
// additions, hence the result, is the same for any number of threads.
// Tensors of up to kMinChunksToSplit chunks stay on the calling thread
// (waking a worker costs more than reading them).
constexpr int64_t kChunk = 1 << 16;
constexpr int64_t kMinChunksToSplit = 4;
// Elements of a strided row gathered at a time (a 4 KiB buffer at most).
constexpr int64_t kGather = 512;

template <class ReduceChunk>
Row reduce_in_chunks(int64_t n, const ReduceChunk& reduce_chunk) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  auto bounds = [n](int64_t c) { return std::pair<int64_t, int64_t>{c * kChunk, std::min(n, (c + 1) * kChunk)}; };
  Row acc = identity();
  if (chunks < kMinChunksToSplit || at::get_num_threads() == 1 || at::in_parallel_region()) {
    for (int64_t c = 0; c < chunks; ++c) {
      const auto [begin, end] = bounds(c);
      acc = combine(acc, reduce_chunk(begin, end));
    }
    return acc;
  }
  std::vector<Row> parts(static_cast<size_t>(chunks));
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const auto [begin, end] = bounds(c);
      parts[static_cast<size_t>(c)] = reduce_chunk(begin, end);
    }
  });
  for (const Row& part : parts) acc = combine(acc, part);
  return acc;
}

// A strided tensor, read in place: TensorIterator orders the dimensions so
// that the inner loop runs along the smallest stride (for a transposed
// matrix, along memory), where the contiguous kernels apply. The statistics
// do not depend on the order of the elements.
template <typename scalar_t>
Row reduce_strided(const at::Tensor& x) {
  at::TensorIterator iter = at::TensorIteratorConfig().add_const_input(x).build();
  return reduce_in_chunks(iter.numel(), [&](int64_t begin, int64_t end) {
    Row acc = identity();
    iter.serial_for_each(
        [&](char** data, const int64_t* strides, int64_t inner, int64_t outer) {
          for (int64_t j = 0; j < outer; ++j) {
            const char* row = data[0] + j * strides[1];
            if (strides[0] == static_cast<int64_t>(sizeof(scalar_t))) {
              acc = combine(acc, reduce_range<scalar_t>(reinterpret_cast<const scalar_t*>(row), 0, inner));
            } else {
              // Gathered into a small buffer, a row with a gap between its
              // elements (every other column, a column, a broadcast) takes
              // the contiguous kernels too.
              scalar_t buf[kGather];
              for (int64_t i = 0; i < inner; i += kGather) {
                const int64_t m = std::min<int64_t>(kGather, inner - i);
                for (int64_t k = 0; k < m; ++k)
                  buf[k] = *reinterpret_cast<const scalar_t*>(row + (i + k) * strides[0]);
                acc = combine(acc, reduce_range<scalar_t>(buf, 0, m));
              }
            }
          }
        },
        {begin, end});
    return acc;
  });
}

}  // namespace

Row compute_stats_cpu(const at::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "graphprobe: compute_stats_cpu expects a CPU tensor, got ", x.device());
  const int64_t n = x.numel();
  if (n == 0) return identity();
  // Lazily conjugated or negated views would read the wrong values in place.
  if (x.is_conj() || x.is_neg()) return compute_stats_cpu(x.resolve_conj().resolve_neg());
  Row result = identity();
  stats::dispatch_reducible(x.scalar_type(), "graphprobe_stats_cpu", [&](auto tag) {
    using scalar_t = std::remove_const_t<std::remove_pointer_t<decltype(tag)>>;
    if (!x.is_contiguous()) {
      result = reduce_strided<scalar_t>(x);
      return;
    }
    const scalar_t* data = x.const_data_ptr<scalar_t>();
    result = reduce_in_chunks(n, [&](int64_t begin, int64_t end) { return reduce_range<scalar_t>(data, begin, end); });
  });
  return result;
}

}  // namespace graphprobe
