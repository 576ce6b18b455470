#include "capture/capture_mode.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>


namespace graphprobe::capture {

static_assert(static_cast<int>(cudaStreamCaptureStatusNone) == static_cast<int>(CaptureStatus::kNone) &&
                  static_cast<int>(cudaStreamCaptureStatusActive) == static_cast<int>(CaptureStatus::kActive) &&
                  static_cast<int>(cudaStreamCaptureStatusInvalidated) ==
                      static_cast<int>(CaptureStatus::kInvalidated),
              "capture_status.h mirrors cudaStreamCaptureStatus");

CaptureStatus stream_capture_status(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return capture_status_from_cuda(static_cast<int>(status));
}

bool stream_is_capturing(cudaStream_t stream) { return counts_as_capturing(stream_capture_status(stream)); }

RelaxedCaptureMode::RelaxedCaptureMode() : previous_(cudaStreamCaptureModeRelaxed) {
  C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&previous_));
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  // A destructor must not throw; an error here leaves the mode relaxed, which
  // is the permissive one, and CUDA reports it again on the next call.
  (void)cudaThreadExchangeStreamCaptureMode(&previous_);
}

void relax_this_thread() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
}

}  // namespace graphprobe::capture
