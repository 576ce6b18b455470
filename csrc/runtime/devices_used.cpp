#include "runtime/devices_used.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>

#include "util/immortal.h"

namespace graphprobe {
namespace {

// Devices below 64 take a lock-free path: note_device_used runs on every
// eager CUDA save.
std::atomic<uint64_t> low_devices{0};

struct HighDevices {
  std::mutex mu;
  std::set<int> set;
};

HighDevices& high_devices() {
  static Immortal<HighDevices> h;  // never destroyed: read by exit hooks
  return h.get();
}

}  // namespace

void note_device_used(int device) {
  if (device < 0) return;
  if (device < 64) {
    const uint64_t bit = uint64_t{1} << device;
    if ((low_devices.load(std::memory_order_relaxed) & bit) == 0) low_devices.fetch_or(bit, std::memory_order_relaxed);
    return;
  }
  HighDevices& h = high_devices();
  const std::lock_guard<std::mutex> lock(h.mu);
  h.set.insert(device);
}

std::vector<int> devices_used() {
  std::vector<int> out;
  const uint64_t bits = low_devices.load(std::memory_order_relaxed);
  for (int d = 0; d < 64; ++d)
    if (bits & (uint64_t{1} << d)) out.push_back(d);
  HighDevices& h = high_devices();
  const std::lock_guard<std::mutex> lock(h.mu);
  out.insert(out.end(), h.set.begin(), h.set.end());
  return out;
}

}  // namespace graphprobe
