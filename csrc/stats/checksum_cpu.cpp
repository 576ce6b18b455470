#include "stats/checksum_cpu.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "stats/below_transforms.h"
#include "stats/checksum.h"
#include "stats/reducible_types.h"

namespace graphprobe::checksum {
namespace {

// Words hashed per task on the intra-op threads.
constexpr int64_t kGrain = 1 << 16;

template <typename W>
uint64_t sum_range(const unsigned char* bytes, int64_t begin, int64_t end) {
  uint64_t h = 0;
  for (int64_t j = begin; j < end; ++j) {
    W w;
    // memcpy: the bytes of a 16-byte element are read as two 8-byte words,
    // and no alignment is assumed.
    std::memcpy(&w, bytes + j * static_cast<int64_t>(sizeof(W)), sizeof(W));
    h += mix(static_cast<uint64_t>(w), static_cast<uint64_t>(j));
  }
  return h;
}

template <typename W>
uint64_t sum_words(const unsigned char* bytes, int64_t m) {
  if (m <= kGrain || at::get_num_threads() == 1 || at::in_parallel_region()) return sum_range<W>(bytes, 0, m);
  // Each task's partial sum in its own slot; the sum modulo 2^64 of the
  // partials is the same in any order.
  const int64_t tasks = (m + kGrain - 1) / kGrain;
  std::vector<uint64_t> parts(static_cast<size_t>(tasks), 0);
  at::parallel_for(0, tasks, 1, [&](int64_t first, int64_t last) {
    for (int64_t t = first; t < last; ++t)
      parts[static_cast<size_t>(t)] = sum_range<W>(bytes, t * kGrain, std::min(m, (t + 1) * kGrain));
  });
  uint64_t h = 0;
  for (uint64_t p : parts) h += p;
  return h;
}

}  // namespace

bool hashable(const at::Tensor& x) {
  const c10::ScalarType t = x.scalar_type();
  return x.layout() == c10::kStrided && x.numel() > 0 && (stats::reducible(t) || c10::isComplexType(t)) &&
         word_bytes(x.element_size()) != 0;
}

std::optional<uint64_t> checksum_cpu(const at::Tensor& input) {
  TORCH_CHECK(input.device().is_cpu(), "graphprobe: checksum_cpu expects a CPU tensor, got ", input.device());
  if (!hashable(input)) return std::nullopt;
  // The values as seen (lazy conjugate/negative views resolved), in
  // row-major order.
  at::Tensor x = input;
  if (input.is_conj() || input.is_neg() || !input.is_contiguous()) {
    const stats::BelowTransforms plain;  // a functorch transform must not wrap the copy
    x = input.resolve_conj().resolve_neg().contiguous();
  }
  const auto* bytes = static_cast<const unsigned char*>(x.const_data_ptr());
  const int64_t word = word_bytes(x.element_size());
  const int64_t m = x.numel() * x.element_size() / word;
  switch (word) {
    case 1: return sum_words<uint8_t>(bytes, m);
    case 2: return sum_words<uint16_t>(bytes, m);
    case 4: return sum_words<uint32_t>(bytes, m);
    default: return sum_words<uint64_t>(bytes, m);
  }
}

}  // namespace graphprobe::checksum
