#include "engine/engine.h"

#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <mutex>
#include <set>

#include "record/dtype_name.h"
#include "runtime/capture_state.h"
#include "runtime/device_runtime.h"
#include "stats/reducible_types.h"
#include "stats/sketch.h"
#include "writer/save_file.h"
#include "writer/save_target.h"
#include "writer/writer.h"

namespace graphprobe {

namespace {

// A new slot's description until its first execution describes it. Never
// destroyed (a function-local leak, like c10's registries): a step still
// queued on the writer thread at interpreter exit may hold it.
const std::shared_ptr<const SlotDesc>& undescribed() {
  static const auto* none = new std::shared_ptr<const SlotDesc>(std::make_shared<const SlotDesc>());
  return *none;
}

}  // namespace

Engine& Engine::get() {
  static Engine* engine = new Engine();  // intentionally leaked, see header
  return *engine;
}

void Engine::set_active(bool active) {
  std::lock_guard<std::mutex> lock(mu_);
  active_ = active;
  update_recording_locked();
}

void Engine::set_tensor_staging(std::optional<std::string> dir) {
  std::lock_guard<std::mutex> lock(mu_);
  staging_ = std::move(dir);
}

std::optional<std::string> Engine::tensor_staging() {
  std::lock_guard<std::mutex> lock(mu_);
  return staging_;
}

void Engine::set_checksums(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  checksums_ = on;
}

void Engine::set_sketches(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  sketches_ = on;
}

bool Engine::checksums() {
  std::lock_guard<std::mutex> lock(mu_);
  return checksums_;
}

std::string Engine::staged_file(const std::string& dir, int64_t slot) {
  return dir + "/slot" + std::to_string(slot) + ".pt";
}

void Engine::set_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mu_);
  enabled_ = enabled;
  update_recording_locked();
  for (auto& kv : tables_) kv.second.rows->set_enabled(enabled);
}

int64_t Engine::open_call(PartLayout layout, InsertMode mode, int64_t program) {
  return register_part(std::move(layout), mode, program, /*opening=*/true);
}

int64_t Engine::close_call(PartLayout layout, InsertMode mode, int64_t program) {
  return register_part(std::move(layout), mode, program, /*opening=*/false);
}

int64_t Engine::register_part(PartLayout layout, InsertMode mode, int64_t program, bool opening) {
  // Read before taking the lock: it asks the CUDA runtime.
  const uint64_t capture = mode == InsertMode::kCaptured ? current_capture_id() : 0;
  TORCH_CHECK(mode != InsertMode::kCaptured || capture != 0,
              "graphprobe: a call was registered as captured, but no CUDA graph capture is under way on the "
              "current stream");
  std::lock_guard<std::mutex> lock(mu_);
  if (mode == InsertMode::kCaptured) program = registry_.program_for_capture(capture);
  return opening ? registry_.open(std::move(layout), mode, program) : registry_.close(std::move(layout), mode, program);
}

int64_t Engine::new_program() {
  std::lock_guard<std::mutex> lock(mu_);
  return registry_.new_program();
}

int64_t Engine::new_slot(c10::Device device, int64_t site, int64_t index, bool captured, int64_t instance) {
  if (static_cast<int64_t>(slots_.size()) >= kMaxSlots) return -1;
  Slot s;
  s.site = site;
  s.index = index;
  s.captured = captured;
  s.instance = instance;
  s.device = device;
  s.desc = undescribed();
  const int64_t id = static_cast<int64_t>(slots_.size());
  Table& t = table(s.device);
  s.row = t.rows->add_row();
  t.row_slot.resize(static_cast<size_t>(s.row + 1), -1);
  t.row_slot[static_cast<size_t>(s.row)] = id;
  slots_.push_back(std::move(s));
  return id;
}

void Engine::refresh(Slot& s, c10::ScalarType dtype, c10::IntArrayRef shape, int64_t numel) {
  // A reused slot describes its latest execution: shapes may change between
  // steps (dynamic shapes). The description is replaced, never changed in
  // place: the writer thread may still be converting an earlier step's rows
  // against the old one (step_rows.h). Usually nothing changed, and the
  // record allocates nothing.
  const SlotDesc& d = *s.desc;
  if (d.dtype == dtype && d.numel == numel && shape.equals(d.shape)) return;
  s.desc = std::make_shared<const SlotDesc>(SlotDesc{dtype, shape.vec(), numel});
}

const std::vector<std::pair<int64_t, int64_t>>* Engine::mirrors_of(int64_t site, int64_t index) const {
  if (mirrors_->empty()) return nullptr;
  const auto it = mirrors_->find(probe_key(site, index));
  return it == mirrors_->end() ? nullptr : &it->second;
}

int64_t Engine::slot_for(c10::Device device, int64_t site, int64_t index, bool capturing) {
  const uint64_t key = probe_key(site, index);
  if (capturing) return new_slot(device, site, index, /*captured=*/true, captured_seen_[key]++);
  const int64_t k = eager_seen_[key]++;
  auto& list = eager_slots_[key];
  if (k < static_cast<int64_t>(list.size())) {
    const int64_t id = list[static_cast<size_t>(k)];
    // The row lives in the table of the device it was made for.
    if (slots_[static_cast<size_t>(id)].device == device) return id;
    const int64_t moved = new_slot(device, site, index, /*captured=*/false, k);
    if (moved >= 0) list[static_cast<size_t>(k)] = moved;
    return moved;
  }
  const int64_t id = new_slot(device, site, index, /*captured=*/false, k);
  if (id >= 0) list.push_back(id);
  return id;
}

Engine::Table& Engine::table(c10::Device device) {
  const std::pair<int, int> key{static_cast<int>(device.type()), device.index()};
  auto it = tables_.find(key);
  if (it == tables_.end()) it = tables_.emplace(key, Table{make_table(device, epoch_, enabled_), {}}).first;
  return it->second;
}

bool Engine::admits_locked(int64_t site, int64_t index, bool capturing) {
  // A capture made while off still records the kernels (the switch is read on
  // the device), so that switching on later needs no re-capture.
  if (!active_ || (!enabled_ && !capturing)) return false;
  const Site* s = registry_.site(site);
  if (s == nullptr) return false;  // inserted under an earlier dumper: not this one's record
  TORCH_CHECK(s->layout != nullptr, "graphprobe.record_stats: site ", site,
              " was never described by a call part; the probe and its registration disagree");
  // A part without tensors is probed once, at index 0, with an empty marker
  // tensor (wiring/probe.py): its row says that the part ran, so that a call
  // of non-tensor values only is still written (call_assembly.cpp).
  const bool marker = s->layout->places.empty() && index == 0;
  TORCH_CHECK(marker || (index >= 0 && index < static_cast<int64_t>(s->layout->places.size())),
              "graphprobe.record_stats: tensor index ", index, " is out of range for site ", site, " of ",
              s->layout->entry, " (", s->layout->places.size(), " tensors); the probe and its registration disagree");
  return true;
}

Engine::DeviceTarget Engine::device_target(const at::Tensor& t, int64_t site, int64_t index, c10::ScalarType dtype,
                                           c10::IntArrayRef shape, int64_t numel) {
  // Read before taking the lock: it asks the device's runtime.
  const bool capturing = is_capturing(t);
  std::lock_guard<std::mutex> lock(mu_);
  DeviceTarget target;
  if (!admits_locked(site, index, capturing)) return target;
  const int64_t id = slot_for(t.device(), site, index, capturing);
  if (id < 0) {
    // Its mirrors (known so far) are lost with it.
    const auto* mirrored = mirrors_of(site, index);
    dropped_ += 1 + (mirrored == nullptr ? 0 : static_cast<int64_t>(mirrored->size()));
    return target;
  }
  Slot& s = slots_[static_cast<size_t>(id)];
  refresh(s, dtype, shape, numel);
  target.table = table(t.device()).rows.get();
  target.row = s.row;
  // A marker row (a part without tensors) has no tensor to file.
  const Site* site_info = registry_.site(site);
  if (staging_ && !site_info->layout->places.empty()) target.staged = staged_file(*staging_, id);
  target.gate = gates_.back().get();
  target.checksum = checksums_;
  target.sketch = sketches_;
  return target;
}

namespace {

// The tensor task meets a dtype that no torch.save file holds (see record()).
void skip_unwritable(c10::ScalarType dtype) {
  writer::Writer::get().count_lost_records(1);
  static std::mutex warned_mu;
  static std::set<c10::ScalarType> warned;  // once per dtype per process
  {
    const std::lock_guard<std::mutex> lock(warned_mu);
    if (!warned.insert(dtype).second) return;
  }
  TORCH_WARN("graphprobe: task \"tensor\" cannot save tensors of dtype ", dtype,
             " (quantized and sub-byte integer dtypes have no torch.save file graphprobe writes): their records "
             "keep their statistics, with data_name null and no .pt file, and are counted in "
             "AclGraphDumper.lost_records. Convert such tensors to save their values (x.dequantize() or "
             "x.int_repr(); x.view(torch.uint8) for sub-byte dtypes).");
}

}  // namespace

void Engine::record(const at::Tensor& x, int64_t site, int64_t index) {
  // An unsupported device is reported before anything else.
  (void)runtime::runtime_for(x.device().type());
  const DeviceTarget target = device_target(x, site, index, x.scalar_type(), x.sizes(), x.numel());
  if (target.table == nullptr) return;
  // Tables are never freed, so using them outside the lock is safe; the
  // table reduces x (on the host, or by launches on the current stream).
  target.table->record(x, target.row, target.checksum, target.sketch);
  // Outside the lock: the writer may make this thread wait for budget. A
  // captured save checks the live switch on every replay; a non-captured one
  // got here only while recording.
  if (!target.staged) return;
  // save_tensor refuses (TypeError) a dtype no torch.save file holds, which
  // is right for acl_save at its call; a probe must not raise in the user's
  // forward, so such a record keeps its statistics without a file (no
  // data_name), is counted as lost, and the dtype is named in a warning.
  if (!writer::writable_dtype(x.scalar_type())) {
    skip_unwritable(x.scalar_type());
    return;
  }
  writer::save_tensor(x, writer::SaveTarget{*target.staged, /*numbered=*/false, target.gate});
}


void Engine::record_mirror(const at::Tensor& x, int64_t site, int64_t index, int64_t source_site,
                           int64_t source_index) {
  (void)runtime::runtime_for(x.device().type());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!staging_) {
      // Registered whatever the switch: a graph captured while off replays
      // without this call once switched on.
      if (!active_ || registry_.site(site) == nullptr || registry_.site(source_site) == nullptr) return;
      const std::pair<int64_t, int64_t> mirror{site, index};
      const auto* known = mirrors_of(source_site, source_index);
      if (known != nullptr && std::find(known->begin(), known->end(), mirror) != known->end()) return;
      // Copied, not changed in place: a step handed to the writer thread
      // still reads the map it was collected with (step_rows.h). Mirrors are
      // registered while warming up and capturing only, so copies are rare.
      auto fresh = std::make_shared<MirrorMap>(*mirrors_);
      (*fresh)[probe_key(source_site, source_index)].push_back(mirror);
      mirrors_ = std::move(fresh);
      return;
    }
  }
  record(x, site, index);
}

void Engine::record_values(const at::Tensor& values, int64_t site, int64_t index, c10::ScalarType dtype,
                           c10::IntArrayRef shape) {
  (void)runtime::runtime_for(values.device().type());
  constexpr int64_t kStats = column::kNanCount + 1;
  TORCH_CHECK(values.scalar_type() == c10::ScalarType::Double && values.dim() == 1 &&
                  (values.numel() == kStats || values.numel() == kStats + sketch::kProjections) &&
                  values.is_contiguous(),
              "graphprobe.record_values: expected the ", kStats, " statistics (or those and the ",
              sketch::kProjections, " sketch sums) as a contiguous float64 vector, got ", values.scalar_type(),
              " of shape ", values.sizes());
  const DeviceTarget target =
      device_target(values, site, index, dtype, shape, c10::multiply_integers(shape.begin(), shape.end()));
  if (target.table == nullptr) return;
  TORCH_CHECK(!target.staged,
              "graphprobe: this compiled graph computes its statistics inside its own kernels and cannot save the "
              "tensors that task \"tensor\" needs; it was compiled while task \"statistics\" was running. Call "
              "torch._dynamo.reset() (or compile again) after starting the tensor-task dumper, or switch fused "
              "statistics off (unset GRAPHPROBE_FUSED_STATS, or graphprobe.wiring.fused_stats.set_enabled(False)) "
              "before compiling");
  target.table->write_values(values, target.row);
}

int64_t Engine::append_rows(StepRows* out, const std::vector<Row>& rows, const std::vector<int64_t>& row_slot,
                            double device_order) {
  int64_t n = 0;
  for (size_t i = 0; i < rows.size() && i < row_slot.size(); ++i) {
    const Row& r = rows[i];
    const int64_t id = row_slot[i];
    if (id < 0 || r.v[column::kStamp] != static_cast<double>(epoch_)) continue;
    const Slot& slot = slots_[static_cast<size_t>(id)];
    const auto* mirrored = mirrors_of(slot.site, slot.index);
    n += 1 + (mirrored == nullptr ? 0 : static_cast<int64_t>(mirrored->size()));
    if (out == nullptr) continue;
    // Only a copy of the row and a reference to its slot's description: the
    // conversion runs on the writer thread (StepRows::executed_rows).
    StepRow& e = out->rows.emplace_back();
    e.row = r;
    e.slot = id;
    e.site = slot.site;
    e.index = slot.index;
    e.instance = slot.instance;
    e.captured = slot.captured;
    e.device_order = device_order;
    e.desc = slot.desc;
    if (r.v[column::kWrites] > 1) out->overwritten = true;
  }
  return n;
}

StepResult Engine::finish_step(bool collect) {
  std::lock_guard<std::mutex> lock(mu_);
  StepResult result;
  if (collect) {
    // Every buffer filled here is one that an earlier step used: no large
    // allocation on the caller's thread (take_step_buffers says why).
    result.step = take_step_buffers();
    StepRows& step = result.step;
    double device_order = 0;
    for (auto& kv : tables_) {
      kv.second.rows->fetch_into(fetched_);
      if (step.rows.capacity() < step.rows.size() + fetched_.size())
        step.rows.reserve(step.rows.size() + fetched_.size());
      step.records += append_rows(&step, fetched_, kv.second.row_slot, device_order++);
    }
    step.mirrors = mirrors_;
    step.md5_requested = checksums_;
    // The call table as the rows need it (a mirror's site included).
    step_sites_.clear();
    for (const StepRow& e : step.rows) {
      step_sites_.push_back(e.site);
      if (const auto* mirrored = mirrors_of(e.site, e.index))
        for (const auto& m : *mirrored) step_sites_.push_back(m.first);
    }
    registry_.snapshot_into(step_sites_, step.table);
  }
  result.dropped = dropped_;
  dropped_ = 0;
  ++epoch_;
  // Zeroed in place, not cleared: the same probes run next step, and their
  // nodes would be freed here and made again by the next forward.
  for (auto& kv : eager_seen_) kv.second = 0;
  registry_.end_step();
  for (auto& kv : tables_) kv.second.rows->set_epoch(epoch_);
  return result;
}

size_t StepRows::bytes() const {
  return sizeof(StepRows) + rows.capacity() * sizeof(StepRow) +
         static_cast<size_t>(records) * (sizeof(ExecutedRow) + 4 * sizeof(int64_t)) + table.copy_bytes();
}

std::vector<ExecutedRow> StepRows::executed_rows() const {
  std::vector<ExecutedRow> out;
  out.reserve(static_cast<size_t>(records));
  for (const StepRow& s : rows) {
    const Row& r = s.row;
    const SlotDesc& d = *s.desc;
    ExecutedRow& e = out.emplace_back();
    e.site = s.site;
    e.index = s.index;
    e.captured = s.captured;
    e.instance = s.instance;
    // Devices are ordered by index, rows within a device by sequence number.
    e.when = {s.device_order, r.v[column::kSeq]};
    TensorRow& t = e.row;
    t.dtype = dtype_name(d.dtype);
    t.shape = d.shape;
    t.kind = stats::value_kind(d.dtype);
    t.numel = d.numel;
    t.max = r.v[column::kMax];
    t.min = r.v[column::kMin];
    t.sum = r.v[column::kSum];
    t.sumsq = r.v[column::kSumSq];
    t.nan_count = static_cast<int64_t>(r.v[column::kNanCount]);
    for (int k = 0; k < sketch::kProjections; ++k) t.sketch[k] = r.v[column::kSketch0 + k];
    t.writes = static_cast<int64_t>(r.v[column::kWrites]);
    t.md5_requested = md5_requested;
    if (r.v[column::kHashed] == 1.0) t.md5 = row_checksum(r);
    t.slot = s.slot;
    if (mirrors == nullptr || mirrors->empty()) continue;
    const auto mirrored = mirrors->find(probe_key(s.site, s.index));
    if (mirrored == mirrors->end()) continue;
    for (const auto& [site, index] : mirrored->second) {
      ExecutedRow copy = out.back();
      copy.site = site;
      copy.index = index;
      out.push_back(std::move(copy));
    }
  }
  return out;
}

std::vector<CallRecord> StepRows::name_calls() && {
  std::vector<CallRecord> calls = assemble_calls(table, executed_rows());
  give_back_step_buffers(std::move(*this));
  return calls;
}

namespace {

struct StepBufferPool {
  static constexpr size_t kKept = 4;
  std::mutex mu;
  std::vector<StepRows> kept;
};

StepBufferPool& step_buffer_pool() {
  static auto* pool = new StepBufferPool();  // leaked: the writer may give back at exit
  return *pool;
}

}  // namespace

StepRows take_step_buffers() {
  StepBufferPool& pool = step_buffer_pool();
  const std::lock_guard<std::mutex> lock(pool.mu);
  if (pool.kept.empty()) return StepRows{};
  StepRows out = std::move(pool.kept.back());
  pool.kept.pop_back();
  return out;
}

void give_back_step_buffers(StepRows&& used) {
  if (used.rows.capacity() == 0) return;  // never filled (or already given back): nothing to keep
  // Emptied here, on the writer thread: the slots' descriptions, mirrors and
  // layouts it referenced are released; the memory of its vectors (and of
  // its calls' entry strings, CallRegistry::snapshot_into) is what is kept.
  used.rows.clear();
  used.mirrors.reset();
  used.records = 0;
  used.overwritten = false;
  used.md5_requested = false;
  used.table.release_layouts();
  StepBufferPool& pool = step_buffer_pool();
  const std::lock_guard<std::mutex> lock(pool.mu);
  if (pool.kept.size() < StepBufferPool::kKept) pool.kept.push_back(std::move(used));
}

int64_t Engine::pending_records() {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  double device_order = 0;
  for (auto& kv : tables_) {
    kv.second.rows->fetch_into(fetched_);
    n += append_rows(nullptr, fetched_, kv.second.row_slot, device_order++);
  }
  return n;
}

void Engine::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  gates_.back()->store(false);
  gates_.push_back(std::make_unique<std::atomic<bool>>(false));
  slots_.clear();
  registry_.clear();
  eager_slots_.clear();
  eager_seen_.clear();
  captured_seen_.clear();
  mirrors_ = std::make_shared<const MirrorMap>();
  for (auto& kv : tables_) {
    Table& t = kv.second;
    if (t.rows->forget_rows()) t.row_slot.clear();
    else std::fill(t.row_slot.begin(), t.row_slot.end(), -1);
  }
  dropped_ = 0;
  ++epoch_;
  for (auto& kv : tables_) kv.second.rows->set_epoch(epoch_);
}

}  // namespace graphprobe
