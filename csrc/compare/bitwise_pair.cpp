#include "compare/bitwise_pair.h"

#include <string_view>
#include <unordered_map>

namespace graphprobe::compare {
namespace {

bool is_module(std::string_view name) { return name.substr(0, 7) == "Module."; }

// Every dot-separated component made only of digits becomes "*": layer
// indices ("layers.1") and call counters ("forward.0", "softmax.3").
std::string without_indices(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    const std::string_view part = name.substr(start, dot - start);
    bool digits = !part.empty();
    for (char c : part) digits = digits && c >= '0' && c <= '9';
    if (start > 0) out.push_back('.');
    out.append(digits ? std::string_view("*") : part);
    start = dot + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> same_code_keys(const Dump& target, const std::vector<CompareRow>& rows,
                                        const std::vector<std::pair<size_t, size_t>>& ranges) {
  const std::vector<std::string>& names = target.entries;
  // The module each entry completes in front of: the next module entry.
  std::vector<std::string> next_module(names.size());
  std::string next;
  for (size_t k = names.size(); k-- > 0;) {
    next_module[k] = next;
    if (is_module(names[k])) next = without_indices(names[k]);
  }
  // An API call's rank among the calls of its name since the module before.
  std::vector<int> rank(names.size(), 0);
  std::unordered_map<std::string, int> seen;
  for (size_t k = 0; k < names.size(); ++k) {
    if (is_module(names[k])) {
      seen.clear();
      continue;
    }
    rank[k] = seen[without_indices(names[k])]++;
  }
  std::vector<std::string> keys(ranges.size());
  for (size_t r = 0; r < ranges.size(); ++r) {
    const auto [begin, end] = ranges[r];
    const uint32_t entry = target.rows[static_cast<size_t>(rows[begin].target)].entry;
    const std::string& name = names[entry];
    if (name.find(".forward") == std::string::npos || name.find(".parameters_grad") != std::string::npos) continue;
    std::string key = without_indices(name);
    if (!is_module(name)) key += " in " + next_module[entry] + " #" + std::to_string(rank[entry]);
    for (size_t i = begin; i < end; ++i) {
      const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
      key += "|";
      key += t.suffix(names);
      key += ":" + t.dtype + ":";
      if (!t.shape_text.str().empty()) key += t.shape_text.str();
      for (int64_t d : t.shape) key += std::to_string(d) + ",";
    }
    keys[r] = std::move(key);
  }
  return keys;
}

}  // namespace graphprobe::compare
