#include "compare/running_statistics.h"

#include <string_view>

namespace graphprobe::compare {
namespace {

// Where an API keeps its running statistics and its training flag.
struct RunningStatisticsApi {
  std::string_view api;  // the entry name up to its call index
  std::string_view mean, var;  // positions of running_mean and running_var
  std::string_view flag, flag_name;  // the flag's position and keyword
  bool flag_default;
};

constexpr RunningStatisticsApi kApis[] = {
    {"Functional.batch_norm", "1", "2", "5", "training", false},
    {"Torch.batch_norm", "3", "4", "5", "training", false},
    {"Functional.instance_norm", "1", "2", "5", "use_input_stats", true},
};

// "Functional.batch_norm.3.forward" -> its API's row, nullptr for any other
// entry (backward entries too: their inputs are gradients).
const RunningStatisticsApi* api_of(std::string_view entry) {
  constexpr std::string_view kForward = ".forward";
  if (entry.size() <= kForward.size() || entry.substr(entry.size() - kForward.size()) != kForward) return nullptr;
  entry.remove_suffix(kForward.size());
  const size_t dot = entry.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == entry.size()) return nullptr;
  for (const char c : entry.substr(dot + 1))
    if (c < '0' || c > '9') return nullptr;
  for (const RunningStatisticsApi& a : kApis)
    if (entry.substr(0, dot) == a.api) return &a;
  return nullptr;
}

// A row suffix "input.5" or "input.training": the argument at `position`
// or passed by `keyword`.
bool is_argument(std::string_view suffix, std::string_view position, std::string_view keyword) {
  constexpr std::string_view kInput = "input.";
  if (suffix.substr(0, kInput.size()) != kInput) return false;
  suffix.remove_prefix(kInput.size());
  return suffix == position || suffix == keyword;
}

bool flag_true(const TensorRecord& r) {
  return r.kinds[kStatMax] == ValueKind::kBool && r.stats[kStatMax] && *r.stats[kStatMax] != 0;
}

}  // namespace

std::vector<bool> unused_running_statistics(const CompareResult& result,
                                            const std::vector<std::pair<size_t, size_t>>& ranges) {
  const auto& rows = result.rows;
  const auto& entries = result.target.entries;
  std::vector<bool> out(rows.size(), false);
  for (const auto& [begin, end] : ranges) {
    const RunningStatisticsApi* api =
        api_of(entries[result.target.rows[static_cast<size_t>(rows[begin].target)].entry]);
    if (!api) continue;
    // Flags come after the tensors they govern: read them first.
    bool target_flag = api->flag_default, bench_flag = api->flag_default;
    for (size_t i = begin; i < end; ++i) {
      if (rows[i].match != MatchKind::kMatched) continue;
      const TensorRecord& t = result.target.rows[static_cast<size_t>(rows[i].target)];
      if (!is_argument(t.suffix(entries), api->flag, api->flag_name)) continue;
      target_flag = flag_true(t);
      bench_flag = flag_true(result.bench.rows[static_cast<size_t>(rows[i].bench)]);
    }
    if (!(target_flag && bench_flag)) continue;
    for (size_t i = begin; i < end; ++i) {
      if (rows[i].match != MatchKind::kMatched) continue;
      const TensorRecord& t = result.target.rows[static_cast<size_t>(rows[i].target)];
      if (t.role != Role::kInput || !t.is_tensor) continue;
      const std::string_view s = t.suffix(entries);
      out[i] = is_argument(s, api->mean, "running_mean") || is_argument(s, api->var, "running_var");
    }
  }
  return out;
}

}  // namespace graphprobe::compare
