#include "compare/parameters_across_steps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>

#include "compare/module_entry_name.h"
#include "compare/parameter_inputs.h"

namespace graphprobe::compare {
namespace {

// "Module.{path}.{Class}.{kind}.{n}" -> "{path}" for kind "forward" or
// "parameters_grad"; "" otherwise.
std::string_view module_path_of(std::string_view name, std::string_view kind) {
  const ModuleEntryName m = split_module_entry(name);
  return m.direction == kind ? m.path : std::string_view();
}

}  // namespace

std::string parameter_key(const TensorRecord& t, const std::vector<std::string>& entries) {
  const std::string& entry = entries[t.entry];
  const std::string_view suffix = t.suffix(entries);
  if (is_parameter_row(t, entries)) {
    const std::string_view path = module_path_of(entry, "forward");
    if (path.empty()) return {};
    return std::string(path) + "." + std::string(suffix.substr(11));
  }
  const std::string_view path = module_path_of(entry, "parameters_grad");
  if (path.empty()) return {};
  // "{name}.{k}" (a list of one gradient per backward pass) or "{name}".
  const size_t dot = suffix.rfind('.');
  const std::string_view name =
      dot != std::string_view::npos && suffix.find_first_not_of("0123456789", dot + 1) == std::string_view::npos
          ? suffix.substr(0, dot)
          : suffix;
  return std::string(path) + "." + std::string(name);
}

std::vector<std::string> differing_parameters(const CompareResult& result, const std::vector<ClassZ>& zc) {
  std::vector<std::string> out;
  for (size_t i = 0; i < result.rows.size() && i < zc.size(); ++i) {
    const CompareRow& r = result.rows[i];
    if (r.match != MatchKind::kMatched) continue;
    const TensorRecord& t = result.target.rows[static_cast<size_t>(r.target)];
    const bool parameter = is_parameter_row(t, result.target.entries);
    // A parameter is judged on the four statistics (an update's drift shows
    // in its Sketch first); its gradient in any statistic.
    const double z = parameter ? std::max(zc[i][kAggregateClass], zc[i][kExtremeClass])
                               : *std::max_element(zc[i].begin(), zc[i].end());
    if (!(z > 1)) continue;
    std::string key = parameter_key(t, result.target.entries);
    if (!key.empty()) out.push_back(std::move(key));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<UpdateBasis> parameter_basis(const CompareResult& result) {
  const Dump& target = result.target;
  const Dump& bench = result.bench;
  struct Seen {
    UpdateBasis basis;
    bool value = false;     // a parameter row's Sketch is in basis.sketch
    bool gradient = false;  // a gradient record was seen
  };
  std::map<std::string, Seen> found;
  for (const CompareRow& r : result.rows) {
    if (r.match != MatchKind::kMatched) continue;
    const TensorRecord& t = target.rows[static_cast<size_t>(r.target)];
    const TensorRecord& b = bench.rows[static_cast<size_t>(r.bench)];
    if (b.sketch < 0) continue;
    std::string key = parameter_key(t, target.entries);
    if (key.empty()) continue;
    Seen& seen = found[key];
    const auto& bs = bench.sketches[static_cast<size_t>(b.sketch)];
    if (is_parameter_row(t, target.entries)) {
      if (!seen.value) seen.basis.sketch = bs;
      seen.value = true;
      continue;
    }
    seen.gradient = true;
    double& e = seen.basis.gradient_error;
    const OptDouble& norm = b.stats[kStatNorm];
    if (t.sketch < 0 || !norm || !(*norm > 0)) {
      e = std::numeric_limits<double>::infinity();  // cannot tell: never judged
      continue;
    }
    const double here = sketch_distance(target.sketches[static_cast<size_t>(t.sketch)], bs) / *norm;
    e = std::max(e, std::isfinite(here) ? here : std::numeric_limits<double>::infinity());
  }
  std::vector<UpdateBasis> out;
  for (auto& [key, seen] : found)
    if (seen.value && seen.gradient && std::isfinite(seen.basis.gradient_error)) {
      seen.basis.key = key;
      out.push_back(std::move(seen.basis));
    }
  return out;  // std::map: sorted by key
}

UpdateJudgment first_update_beyond(const UpdateBasis& before, const std::array<double, 4>& target_after,
                                   const std::array<double, 4>& bench_after, double floor_abs) {
  UpdateJudgment j;
  const double update = sketch_distance(bench_after, before.sketch);
  const double spread = kUpdateFlipMargin * std::sqrt(before.gradient_error);
  if (!(update > 0) || !(spread < 1)) return j;
  j.judged = true;
  j.beyond = sketch_distance(target_after, bench_after) > spread * update + floor_abs;
  return j;
}

}  // namespace graphprobe::compare
