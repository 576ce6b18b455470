#pragma once
// Prepares a thread of graphprobe's own (the writer) for the CUDA calls it
// makes on behalf of a device: polling and destroying a copy's event, and
// freeing its pinned buffer (torch's pinned allocator records an event then).
//
// Two things must come before the first such call, in this order:
//  1. make the job's device current: a thread's first CUDA call otherwise
//     binds device 0 and creates a context there (~0.5 GB, and an error
//     under EXCLUSIVE_PROCESS when device 0 belongs to another rank);
//  2. switch the thread to relaxed capture mode, once: in the default global
//     mode a CUDA call from this thread invalidates a capture that another
//     thread has under way (PyTorch fixed the same for its NCCL watchdog).
//
// Torch- and CUDA-free (`Ops` does the calls) so that the order is unit
// tested anywhere (csrc/tests/test_device_thread.cpp).

namespace graphprobe::writer {

// One per thread. `Ops` has set_device(int) and relax_capture_mode().
template <class Ops>
class DeviceThread {
 public:
  void enter(int device, Ops& ops) {
    if (device != current_) {
      ops.set_device(device);
      current_ = device;
    }
    if (!relaxed_) {
      ops.relax_capture_mode();
      relaxed_ = true;
    }
  }

 private:
  int current_ = -1;
  bool relaxed_ = false;
};

}  // namespace graphprobe::writer
