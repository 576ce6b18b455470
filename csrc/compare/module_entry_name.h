#pragma once
// A module entry's name, taken apart. Torch-free.

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

}  // namespace graphprobe::compare
