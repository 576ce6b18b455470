// The id of the CUDA graph capture under way on the current stream: calls
// registered while capturing eager code belong to that capture's program.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include "engine/device_table.h"

namespace graphprobe {

uint64_t current_capture_id() {
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  C10_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id));
  // An invalidated capture still has an id: its calls go nowhere, and the
  // user sees CUDA's own error when the capture ends.
  return status == cudaStreamCaptureStatusNone ? 0 : static_cast<uint64_t>(id);
}

}  // namespace graphprobe
