// How capture statuses read (capture/capture_status.h): everything but None
// counts as capturing, an invalidated capture included.
#include "capture/capture_status.h"
#include "check.h"

namespace {

void run() {
  using namespace graphprobe::capture;
  // cudaStreamCaptureStatusNone / Active / Invalidated.
  CHECK(capture_status_from_cuda(0) == CaptureStatus::kNone);
  CHECK(capture_status_from_cuda(1) == CaptureStatus::kActive);
  CHECK(capture_status_from_cuda(2) == CaptureStatus::kInvalidated);
  CHECK(capture_status_from_cuda(7) == CaptureStatus::kInvalidated);  // unknown: not usable, still capturing
  CHECK(!counts_as_capturing(capture_status_from_cuda(0)));
  CHECK(counts_as_capturing(capture_status_from_cuda(1)));
  CHECK(counts_as_capturing(capture_status_from_cuda(2)));
  CHECK(counts_as_capturing(capture_status_from_cuda(7)));
  CHECK(std::string(describe(CaptureStatus::kInvalidated)).find("invalidated") != std::string::npos);
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run)
