// The writer thread's preparation for CUDA calls (writer/device_thread.h):
// the device is made current before the capture mode is relaxed, relaxing
// happens once per thread, and a new device is made current before its calls.
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "writer/device_thread.h"

namespace {

struct RecordingOps {
  std::vector<std::string> calls;
  void set_device(int d) { calls.push_back("set_device " + std::to_string(d)); }
  void relax_capture_mode() { calls.push_back("relax"); }
};

using Calls = std::vector<std::string>;

std::string join(const Calls& c) {
  std::string s;
  for (const auto& x : c) s += "[" + x + "]";
  return s;
}

void run() {
  using graphprobe::writer::DeviceThread;
  RecordingOps ops;
  DeviceThread<RecordingOps> thread;
  // First call on a thread: device first (a first CUDA call would bind
  // device 0), then relaxed mode.
  thread.enter(1, ops);
  CHECK_EQ(join(ops.calls), join(Calls{"set_device 1", "relax"}));
  thread.enter(1, ops);
  CHECK_EQ(join(ops.calls), join(Calls{"set_device 1", "relax"}));
  thread.enter(0, ops);
  CHECK_EQ(join(ops.calls), join(Calls{"set_device 1", "relax", "set_device 0"}));

  // Another thread has its own state: it prepares itself again.
  RecordingOps other_ops;
  std::thread other([&] {
    thread_local DeviceThread<RecordingOps> mine;
    mine.enter(2, other_ops);
    mine.enter(2, other_ops);
  });
  other.join();
  CHECK_EQ(join(other_ops.calls), join(Calls{"set_device 2", "relax"}));
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run)
