#pragma once
// A module entry's name, taken apart. Torch-free.

#include <algorithm>
#include <string_view>

namespace graphprobe::compare {

// "Module.{path}.{Class}.{direction}.{n}" -> path and direction
// ("Module.layers.0.mlp.MLP.forward.3" -> "layers.0.mlp", "forward"); both
// empty for a name that is not a module entry (APIs, parameters_grad of a
// top-level model without a path).
struct ModuleEntryName {
  std::string_view path;
  std::string_view direction;
  std::string_view class_name;  // "MLP"
};

inline ModuleEntryName split_module_entry(std::string_view name) {
  constexpr std::string_view kPrefix = "Module.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return {};
  name.remove_prefix(kPrefix.size());
  size_t dot = name.rfind('.');  // before the call counter
  if (dot == std::string_view::npos) return {};
  name = name.substr(0, dot);
  dot = name.rfind('.');  // before the direction
  if (dot == std::string_view::npos) return {};
  const std::string_view direction = name.substr(dot + 1);
  name = name.substr(0, dot);
  dot = name.rfind('.');  // before the class
  if (dot == std::string_view::npos) return {};
  return {name.substr(0, dot), direction, name.substr(dot + 1)};
}

namespace detail {
// name without ".{marker}" and an optional ".{digits}" after it; "" when
// name does not end so.
inline std::string_view before_marker(std::string_view name, std::string_view marker, bool counter_required) {
  size_t end = name.size();
  const size_t dot = name.rfind('.');
  if (dot != std::string_view::npos && dot + 1 < name.size() &&
      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(dot) + 1, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
    end = dot;
  else if (counter_required)
    return {};
  const std::string_view head = name.substr(0, end);
  if (head.size() <= marker.size() + 1 || head.substr(head.size() - marker.size()) != marker ||
      head[head.size() - marker.size() - 1] != '.')
    return {};
  return head.substr(0, head.size() - marker.size() - 1);
}
}  // namespace detail

// "Module.fc.Linear.parameters_grad.0" (or without ".0") -> "Module.fc.Linear";
// "" for any other name.
inline std::string_view module_of_parameters_grad(std::string_view name) {
  return detail::before_marker(name, "parameters_grad", false);
}

// "Module.fc.Linear.backward.2" -> "Module.fc.Linear", the prefix its
// parameters_grad entry shares; "" for any other name (APIs' backward calls
// are "X.N.backward").
inline std::string_view module_of_backward(std::string_view name) {
  if (name.substr(0, 7) != "Module.") return {};
  return detail::before_marker(name, "backward", true);
}

}  // namespace graphprobe::compare
