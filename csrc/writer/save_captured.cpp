#include "writer/save_captured.h"

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "util/immortal.h"
#include "writer/writer.h"

namespace graphprobe::writer {
namespace {

// What the host function of one captured save needs on every replay. Kept
// for the life of the process (see kept_points): a graph can be replayed at
// any time and graphprobe cannot see when the user drops it. The cost is the
// staging buffer (x's size in pinned memory) per captured save point.
struct ReplayPoint {
  SaveTarget target;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes;
  size_t nbytes = 0;
  void* staging = nullptr;  // pinned, from the runtime; never freed
};

struct KeptPoints {
  std::mutex mu;
  std::deque<std::unique_ptr<ReplayPoint>> points;
};

KeptPoints& kept_points() {
  // Never destroyed: a replay (and its callback) may still run while static
  // destructors run at exit.
  static Immortal<KeptPoints> kept;
  return kept.get();
}

// The host function. Runs on a driver thread after the staging copy of this
// replay has landed; it must not call the device runtime, must not take the
// GIL and must not throw. It may wait for budget, which holds back the
// stream (and so the next replay) until the writer catches up: nothing is
// dropped.
void on_replay(void* payload) {
  const auto* p = static_cast<const ReplayPoint*>(payload);
  if (p->target.gate != nullptr && !p->target.gate->load(std::memory_order_relaxed)) return;
  Writer::get().submit_from_callback(p->target.path, p->target.numbered, p->dtype, p->sizes, p->staging, p->nbytes);
}

}  // namespace

void save_captured(runtime::DeviceRuntime& rt, const at::Tensor& x, const SaveTarget& target) {
  const c10::DeviceIndex device = x.device().index();
  // Under capture this records a copy kernel into the graph (its buffer comes
  // from the graph's pool and is read by the copy below in stream order).
  const at::Tensor src = x.resolve_conj().resolve_neg().contiguous();
  auto point = std::make_unique<ReplayPoint>();
  point->target = target;
  point->dtype = x.scalar_type();
  point->sizes = x.sizes().vec();
  point->nbytes = x.nbytes();
  point->staging = rt.allocate_pinned(device, point->nbytes);
  if (point->nbytes > 0) rt.copy_to_host_async(device, point->staging, src.const_data_ptr(), point->nbytes);
  rt.launch_host_func(device, &on_replay, point.get());
  auto& kept = kept_points();
  const std::lock_guard<std::mutex> lock(kept.mu);
  kept.points.push_back(std::move(point));
}

}  // namespace graphprobe::writer
