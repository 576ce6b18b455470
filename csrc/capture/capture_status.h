#pragma once
// What a stream's capture status means to graphprobe. Free of CUDA and torch
// headers so that the mapping is unit tested on any machine
// (csrc/tests/test_capture_status.cpp); capture_mode_cuda.cpp checks the
// numbers against cudaStreamCaptureStatus.

namespace graphprobe::capture {

enum class CaptureStatus : int { kNone = 0, kActive = 1, kInvalidated = 2 };

// cudaStreamCaptureStatus as returned by cudaStreamIsCapturing. A value this
// code does not know is taken as an invalidated capture: still capturing,
// but not usable.
constexpr CaptureStatus capture_status_from_cuda(int raw) {
  return raw == 0 ? CaptureStatus::kNone : raw == 1 ? CaptureStatus::kActive : CaptureStatus::kInvalidated;
}

// Every status but None counts as capturing. An invalidated capture has not
// been ended yet: treating the stream as eager would run eager work (host
// waits, eager copies) on it, and the user would see graphprobe's confusing
// follow-up error instead of CUDA's report of what broke the capture.
constexpr bool counts_as_capturing(CaptureStatus s) { return s != CaptureStatus::kNone; }

constexpr const char* describe(CaptureStatus s) {
  return s == CaptureStatus::kNone     ? "not capturing"
         : s == CaptureStatus::kActive ? "being captured into a CUDA graph"
                                       : "in a CUDA graph capture that was invalidated and not yet ended";
}

}  // namespace graphprobe::capture
