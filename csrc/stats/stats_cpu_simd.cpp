#include "stats/stats_cpu_simd.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>

#include "stats/simd_isa.h"

namespace graphprobe::simd {
namespace {

enum class Level { kNone, kAvx2, kAvx512 };

Level detect() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // __builtin_cpu_supports also checks that the OS saves the vector state
  // (XCR0), so an AVX-512 CPU under a kernel that does not is reported as not.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2"))
    return Level::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Level::kAvx2;
#endif
  return Level::kNone;
}

Level cap_from_env() {
  if (std::getenv("GRAPHPROBE_NO_SIMD") != nullptr) return Level::kNone;
  const char* cap = std::getenv("GRAPHPROBE_SIMD");
  if (cap == nullptr || *cap == '\0' || std::strcmp(cap, "avx512") == 0) return Level::kAvx512;
  if (std::strcmp(cap, "avx2") == 0) return Level::kAvx2;
  if (std::strcmp(cap, "none") == 0) return Level::kNone;
  TORCH_CHECK(false, "graphprobe: environment variable GRAPHPROBE_SIMD='", cap,
              "' is not a level; allowed are none, avx2, avx512");
}

Level current() {
  static const Level level = [] {
    const Level cpu = detect();
    const Level cap = cap_from_env();
    return cap < cpu ? cap : cpu;
  }();
  return level;
}

// The block kernels leave NaNs out of max/min without counting them: a NaN
// element makes the double sum NaN, and only then are they counted (so is a
// tensor holding both inf and -inf, whose sum is NaN too; it counts 0).
template <class T, class IsNan>
Row with_nan_count(Row s, const T* data, int64_t n, IsNan is_nan) {
  if (s.v[column::kSum] == s.v[column::kSum]) return s;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += is_nan(data[i]);
  s.v[column::kNanCount] = static_cast<double>(count);
  return s;
}

bool f32_nan(float v) { return v != v; }
// An all-ones exponent with a non-zero mantissa, as bits.
bool bf16_nan(uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }
bool f16_nan(uint16_t b) { return (b & 0x7fffu) > 0x7c00u; }

}  // namespace

const char* level() {
  switch (current()) {
    case Level::kAvx512:
      return "avx512";
    case Level::kAvx2:
      return "avx2";
    default:
      return "none";
  }
}

bool available() { return current() != Level::kNone; }

Row reduce_f32(const float* data, int64_t n) {
  const Row s = current() == Level::kAvx512 ? avx512::reduce_f32(data, n) : avx2::reduce_f32(data, n);
  return with_nan_count(s, data, n, f32_nan);
}

Row reduce_bf16(const uint16_t* bits, int64_t n) {
  const Row s = current() == Level::kAvx512 ? avx512::reduce_bf16(bits, n) : avx2::reduce_bf16(bits, n);
  return with_nan_count(s, bits, n, bf16_nan);
}

Row reduce_f16(const uint16_t* bits, int64_t n) {
  const Row s = current() == Level::kAvx512 ? avx512::reduce_f16(bits, n) : avx2::reduce_f16(bits, n);
  return with_nan_count(s, bits, n, f16_nan);
}

void sketch_f32(const float* data, uint64_t first_group, int64_t groups, double out[4]) {
  if (current() == Level::kAvx512) avx512::sketch_f32(data, first_group, groups, out);
  else avx2::sketch_f32(data, first_group, groups, out);
}

void sketch_bf16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]) {
  if (current() == Level::kAvx512) avx512::sketch_bf16(bits, first_group, groups, out);
  else avx2::sketch_bf16(bits, first_group, groups, out);
}

void sketch_f16(const uint16_t* bits, uint64_t first_group, int64_t groups, double out[4]) {
  if (current() == Level::kAvx512) avx512::sketch_f16(bits, first_group, groups, out);
  else avx2::sketch_f16(bits, first_group, groups, out);
}

}  // namespace graphprobe::simd
