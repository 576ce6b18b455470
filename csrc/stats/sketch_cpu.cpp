#include "stats/sketch_cpu.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "stats/below_transforms.h"
#include "stats/reducible_types.h"
#include "stats/stats_cpu_simd.h"

namespace graphprobe::sketch {
namespace {

using Sums = std::array<double, kProjections>;

// The four signs of each 4-bit lane pattern, so that the inner loop is a
// table load and a multiply-add per element, which the compiler vectorises
// across the four projections.
struct SignTable {
  alignas(32) double s[16][kProjections];
  constexpr SignTable() : s{} {
    for (int p = 0; p < 16; ++p)
      for (int k = 0; k < kProjections; ++k) s[p][k] = ((p >> k) & 1) ? -1.0 : 1.0;
  }
};
constexpr SignTable kSigns;

// Elements per task on the intra-op threads (a multiple of kGroup).
constexpr int64_t kChunk = int64_t{1} << 16;

template <typename T>
Sums sum_range(const T* x, int64_t begin, int64_t end) {
  double acc[kProjections] = {0, 0, 0, 0};
  int64_t i = begin;
  // Whole groups from a group boundary take the vectorised kernels (float32
  // accumulators per block: stats_cpu_simd.h); the rest the loop below.
  constexpr bool kVectorised =
      std::is_same_v<T, float> || std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>;
  if constexpr (kVectorised) {
    if (simd::available() && begin % kGroup == 0) {
      const int64_t groups = (end - begin) / kGroup;
      const uint64_t first = static_cast<uint64_t>(begin / kGroup);
      if constexpr (std::is_same_v<T, float>) simd::sketch_f32(x + begin, first, groups, acc);
      else if constexpr (std::is_same_v<T, c10::BFloat16>)
        simd::sketch_bf16(reinterpret_cast<const uint16_t*>(x + begin), first, groups, acc);
      else simd::sketch_f16(reinterpret_cast<const uint16_t*>(x + begin), first, groups, acc);
      i = begin + groups * kGroup;
    }
  }
  while (i < end) {
    const uint64_t g = static_cast<uint64_t>(i / kGroup);
    const uint64_t bits = group_bits(g);
    const int64_t stop = std::min<int64_t>(end, static_cast<int64_t>(g + 1) * kGroup);
    for (; i < stop; ++i) {
      const double v = static_cast<double>(x[i]);
      const double* s = kSigns.s[lane_bits(bits, static_cast<int>(i % kGroup))];
      for (int k = 0; k < kProjections; ++k) acc[k] += s[k] * v;
    }
  }
  return {acc[0], acc[1], acc[2], acc[3]};
}

template <typename T>
Sums sum_all(const T* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  Sums total{0, 0, 0, 0};
  if (chunks < 4 || at::get_num_threads() == 1 || at::in_parallel_region()) {
    // One chunk at a time, in order: the same grouping as the parallel path.
    for (int64_t c = 0; c < chunks; ++c) {
      const Sums part = sum_range(x, c * kChunk, std::min(n, (c + 1) * kChunk));
      for (int k = 0; k < kProjections; ++k) total[k] += part[k];
    }
    return total;
  }
  std::vector<Sums> parts(static_cast<size_t>(chunks));
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c)
      parts[static_cast<size_t>(c)] = sum_range(x, c * kChunk, std::min(n, (c + 1) * kChunk));
  });
  for (const Sums& part : parts)
    for (int k = 0; k < kProjections; ++k) total[k] += part[k];
  return total;
}

}  // namespace

std::array<double, kProjections> sketch_cpu(const at::Tensor& input) {
  TORCH_CHECK(input.device().is_cpu(), "graphprobe: sketch_cpu expects a CPU tensor, got ", input.device());
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  Sums out{kNan, kNan, kNan, kNan};
  if (input.numel() == 0 || input.layout() != c10::kStrided ||
      stats::value_kind(input.scalar_type()) != ValueKind::kFloating)
    return out;
  const c10::ScalarType t = input.scalar_type();
  const bool direct = t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
  at::Tensor x = input;
  if (!direct || input.is_neg() || !input.is_contiguous()) {
    // Row-major order is what the signs are defined on: a strided tensor is
    // read as its contiguous copy, float8 as float32 (exact), both below
    // any transform the probe runs under (stats/below_transforms.h).
    const stats::BelowTransforms plain;
    x = (direct ? input : input.to(at::kFloat)).resolve_neg().contiguous();
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "graphprobe_sketch_cpu",
                                  [&] { out = sum_all(x.const_data_ptr<scalar_t>(), x.numel()); });
  return out;
}

}  // namespace graphprobe::sketch
