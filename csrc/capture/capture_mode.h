#pragma once
// Graph-capture helpers for the CUDA runtime.

#include <cuda_runtime_api.h>

#include "capture/capture_status.h"

namespace graphprobe::capture {

// The capture status of `stream` (cudaStreamIsCapturing).
CaptureStatus stream_capture_status(cudaStream_t stream);

// Whether `stream` is capturing, an invalidated capture included (see
// counts_as_capturing).
bool stream_is_capturing(cudaStream_t stream);

// Switches this thread to relaxed capture mode for its lifetime, so that
// memory can be allocated while another stream is capturing; restores the
// previous mode on every way out.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode previous_;
};

// Switches this thread to relaxed capture mode for good (a worker thread of
// graphprobe's own, before its first CUDA call: in the default global mode
// its CUDA calls would invalidate a capture that another thread runs).
void relax_this_thread();

}  // namespace graphprobe::capture
