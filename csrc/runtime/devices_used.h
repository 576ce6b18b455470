#pragma once
// The CUDA devices graphprobe has used in this process (a record table or a
// saved tensor on them). flush() and the exit hook synchronise only these:
// synchronising every visible device would create a context (~0.5 GB) on
// each, in every rank process, and fails on devices in EXCLUSIVE_PROCESS mode
// that belong to another process. Torch-free.

#include <vector>

namespace graphprobe {

void note_device_used(int device);

// Ascending device indices.
std::vector<int> devices_used();

}  // namespace graphprobe
