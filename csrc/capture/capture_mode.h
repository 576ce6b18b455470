#pragma once
// Graph-capture helpers for the CUDA runtime.

#include <cuda_runtime_api.h>

namespace graphprobe::capture {

// Whether `stream` is being captured (cudaStreamIsCapturing).
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

}  // namespace graphprobe::capture
