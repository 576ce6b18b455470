#pragma once
// The forward call a backward record belongs to, by name. Torch-free.

#include <algorithm>
#include <string>
#include <string_view>

namespace graphprobe::compare {

// "X.backward.3" -> "X.forward.3" (modules); "X.3.backward" -> "X.3.forward"
// (APIs); "" for any other name.
inline std::string forward_of(std::string_view name) {
  auto ends_with = [](std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
  };
  if (ends_with(name, ".backward")) return std::string(name.substr(0, name.size() - 9)) + ".forward";
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == name.size()) return "";
  const std::string_view n = name.substr(dot + 1);
  if (!std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) return "";
  const std::string_view head = name.substr(0, dot);
  if (!ends_with(head, ".backward")) return "";
  return std::string(head.substr(0, head.size() - 9)) + ".forward." + std::string(n);
}

}  // namespace graphprobe::compare
