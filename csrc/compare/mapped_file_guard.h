#pragma once
// Keeps a process alive when a file it has mapped for reading shrinks under
// the mapping. Torch-free, Linux.
//
// compare maps each dump.json instead of reading it into fresh memory,
// whose pages the kernel zeroes (and a virtual machine's host backs) when
// first touched: reading a 100 MB dump so took 0.24 s in read() here, 0.03 s
// into memory already touched; mapped, a compare of two takes ~5 % less
// CPU (benchmarks/results/compare.md). The price of a mapping is SIGBUS: when another process truncates the file
// while it is mapped, the first read of a page past the new end raises it,
// and by default it ends the process with no message. While a range is
// guarded, a SIGBUS inside it maps a page of zeros there instead and marks
// the range: the reader sees NUL bytes, which JSON never holds, and reports
// the file as changed while it was read (TextFeed). A SIGBUS anywhere else
// goes to whatever handled SIGBUS before (Python's faulthandler, or the
// default action).
//
// A handler that something installs after the first guard (faulthandler
// enabled later) replaces this one: a file that shrinks is then fatal again.

#include <cstddef>

namespace graphprobe::compare {

// Guards [data, data + size); returns a slot for the calls below, or -1
// when every slot is taken (then the caller must not map: read instead).
int guard_mapping(const char* data, size_t size);

// Stops guarding; the range must still be mapped (unmap after this).
void unguard_mapping(int slot);

// A page of the range read as zeros because the file no longer held it.
bool mapping_shrank(int slot);

}  // namespace graphprobe::compare
