#pragma once
// Asks for transparent huge pages under a large buffer not yet touched (a
// vector just reserved). Where the system grants them on request (THP
// "madvise"), the buffer is faulted in 2 MiB at a time instead of 4 KiB: a
// page fault per 4 KiB of records was several percent of a compare. Only
// advice: nothing changes where it is not taken. Torch-free.

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace graphprobe::compare {

inline void advise_huge_pages(const void* data, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  // Only the whole huge pages inside the buffer: the advice covers whole
  // pages, and the memory around the buffer is not ours to advise.
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

}  // namespace graphprobe::compare
