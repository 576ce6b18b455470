#include "capture/capture_mode.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "engine/device_table.h"

namespace graphprobe::capture {

bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status == cudaStreamCaptureStatusActive;
}

RelaxedCaptureMode::RelaxedCaptureMode() : previous_(cudaStreamCaptureModeRelaxed) {
  C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&previous_));
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  // A destructor must not throw; an error here leaves the mode relaxed, which
  // is the permissive one, and CUDA reports it again on the next call.
  (void)cudaThreadExchangeStreamCaptureMode(&previous_);
}

}  // namespace graphprobe::capture

namespace graphprobe {

bool is_capturing(const at::Tensor& x) {
  if (!x.is_cuda()) return false;
  return capture::stream_is_capturing(at::cuda::getCurrentCUDAStream(x.device().index()).stream());
}

}  // namespace graphprobe
