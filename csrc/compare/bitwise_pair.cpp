#include "compare/bitwise_pair.h"

#include <algorithm>
#include <functional>
#include <string_view>

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

uint64_t SameCodeKeys::key(uint32_t entry, size_t begin, size_t end) {
  const std::vector<std::string>& names = target_.entries;
  // Ranks of the API calls up to this entry (entries without rows count too).
  int rank = 0;
  for (; counted_ <= entry && counted_ < names.size(); ++counted_) {
    if (is_module(names[counted_])) {
      rank_.clear();
      continue;
    }
    const int r = rank_[without_indices(names[counted_])]++;
    if (counted_ == entry) rank = r;
  }
  const std::string& name = names[entry];
  if (name.find(".forward") == std::string::npos || name.find(".parameters_grad") != std::string::npos) return 0;
  std::string key = without_indices(name);
  if (!is_module(name)) {
    next_module_ = std::max(next_module_, static_cast<size_t>(entry) + 1);
    while (next_module_ < names.size() && !is_module(names[next_module_])) ++next_module_;
    key += " in ";
    if (next_module_ < names.size()) key += without_indices(names[next_module_]);
    key += " #" + std::to_string(rank);
  }
  for (size_t i = begin; i < end; ++i) {
    const TensorRecord& t = target_.rows[static_cast<size_t>(rows_[i].target)];
    key += "|";
    key += t.suffix(names);
    key += ":" + t.dtype + ":";
    key += t.shape_text.str();
    for (int64_t d : t.shape) key += std::to_string(d) + ",";
  }
  const uint64_t h = std::hash<std::string>{}(key);
  return h == 0 ? 1 : h;
}

}  // namespace graphprobe::compare
