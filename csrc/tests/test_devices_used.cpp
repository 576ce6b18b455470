// The devices graphprobe used (runtime/devices_used.h): what flush() syncs.
#include <thread>
#include <vector>

#include "check.h"
#include "runtime/devices_used.h"

namespace {

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int d : v) s += std::to_string(d) + ",";
  return s;
}

void run() {
  using graphprobe::devices_used;
  using graphprobe::note_device_used;
  CHECK_EQ(join(devices_used()), std::string(""));
  note_device_used(3);
  note_device_used(3);
  note_device_used(-1);  // not a device: ignored
  std::thread t([] { note_device_used(1); });
  t.join();
  note_device_used(70);  // beyond the lock-free bits
  CHECK_EQ(join(devices_used()), std::string("1,3,70,"));
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run)
