#include "compare/parameters_across_steps.h"

#include <algorithm>
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

}  // namespace graphprobe::compare
