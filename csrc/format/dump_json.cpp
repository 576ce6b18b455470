#include "format/dump_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string_view>
#include <utility>

#include "format/json_writer.h"
#include "record/dump_keys.h"

namespace graphprobe {
namespace {

// A node of one call's input/output tree. Lists and dicts keep the order in
// which their children were first seen (Python's argument order).
struct Node {
  enum Type { kList, kDict, kLeaf } type = kLeaf;
  std::vector<std::pair<std::string, std::unique_ptr<Node>>> children;
  std::string leaf_json;  // for kLeaf: the finished JSON value
};

bool is_index(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

Node* child(Node* parent, const std::string& key, Node::Type type) {
  for (auto& kv : parent->children)
    if (kv.first == key) return kv.second.get();
  parent->children.emplace_back(key, std::make_unique<Node>());
  Node* n = parent->children.back().second.get();
  n->type = type;
  return n;
}

void insert(Node* root, const Place& path, std::string leaf_json) {
  Node* cur = root;
  for (size_t i = 0; i < path.size(); ++i) {
    const bool last = i + 1 == path.size();
    Node::Type t = last ? Node::kLeaf : (is_index(path[i + 1]) ? Node::kList : Node::kDict);
    cur = child(cur, path[i], t);
  }
  cur->leaf_json = std::move(leaf_json);
}

// A non-tensor leaf as msprobe writes it: {"type": "int", "value": 3}; a
// value of a type without a JSON form carries its type only. None is a plain
// null, as msprobe writes it: a {"type": "NoneType"} object would not pair
// with msprobe's row in either tool's compare.
std::string leaf_json(const Leaf& leaf) {
  if (leaf.kind == Leaf::Kind::kNone) return "null";
  json::Writer w(0);
  w.begin_object();
  w.key(dump_keys::kType);
  w.value_string(leaf.type);
  if (leaf.kind != Leaf::Kind::kOpaque) w.key(dump_keys::kValue);
  switch (leaf.kind) {
    case Leaf::Kind::kNone: break;  // written as null above
    case Leaf::Kind::kBool: w.value_bool(leaf.b); break;
    case Leaf::Kind::kInt: w.value_raw(leaf.text); break;  // digits of any size
    case Leaf::Kind::kFloat: w.value_number(leaf.f); break;
    case Leaf::Kind::kStr: w.value_string(leaf.text); break;
    case Leaf::Kind::kOpaque: break;
  }
  w.end_object();
  return w.take();
}

void write_stat(json::Writer& w, const TensorRow& r, double v) {
  if (r.kind == ValueKind::kBoolean) w.value_bool(v != 0);
  else if (r.kind == ValueKind::kIntegral && std::isfinite(v) && std::fabs(v) < 9.0e15)
    w.value_integer(static_cast<int64_t>(v));
  else w.value_number(v);
}

std::string tensor_leaf(const TensorRow& r) {
  json::Writer w(0);
  w.begin_object();
  w.key(dump_keys::kType);
  w.value_string(dump_keys::kTensorType);
  w.key(dump_keys::kDtype);
  w.value_string(r.dtype);
  w.key(dump_keys::kShape);
  w.begin_array();
  for (int64_t d : r.shape) w.value_integer(d);
  w.end_array();
  const bool has_stats = r.numel > 0 && r.kind != ValueKind::kNoStats;
  const bool nan = r.nan_count > 0;
  w.key(dump_keys::kMax);
  if (!has_stats) w.value_null();
  else if (nan) w.value_number(NAN);
  else write_stat(w, r, r.max);
  w.key(dump_keys::kMin);
  if (!has_stats) w.value_null();
  else if (nan) w.value_number(NAN);
  else write_stat(w, r, r.min);
  // msprobe leaves Mean and Norm empty for bool tensors.
  const bool has_moments = has_stats && r.kind != ValueKind::kBoolean;
  w.key(dump_keys::kMean);
  if (!has_moments) w.value_null();
  else w.value_number(nan ? NAN : r.sum / static_cast<double>(r.numel));
  w.key(dump_keys::kNorm);
  if (!has_moments) w.value_null();
  else w.value_number(nan ? NAN : std::sqrt(r.sumsq));
  // After Norm and before requires_grad, where msprobe's readers look up
  // their keys by name: an extra key is passed over (tests/test_compare_msprobe.py).
  if (has_moments && r.kind == ValueKind::kFloating && !nan && std::isfinite(r.sketch[0]) && std::isfinite(r.sketch[1]) &&
      std::isfinite(r.sketch[2]) && std::isfinite(r.sketch[3])) {
    w.key(dump_keys::kSketch);
    w.begin_array();
    for (double v : r.sketch) w.value_number(v);
    w.end_array();
  }
  w.key(dump_keys::kRequiresGrad);
  w.value_bool(r.requires_grad);
  for (const auto& [key, json_text] : r.extras) {
    w.key(key);
    w.value_raw(json_text);
  }
  if (r.md5_requested) {
    // msprobe's key; the value is graphprobe's 64-bit checksum, 16 lowercase
    // hex digits (msprobe's own CRC-32 has 8: the two never compare equal).
    w.key(dump_keys::kMd5);
    if (r.md5) {
      char hex[17];
      std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(*r.md5));
      w.value_string(hex);
    } else {
      w.value_null();
    }
  }
  if (!r.data_name.empty()) {
    w.key(dump_keys::kDataName);
    w.value_string(r.data_name);
  }
  if (r.writes > 1) {
    w.key(dump_keys::kWriteCount);
    w.value_integer(r.writes);
  }
  w.end_object();
  return w.take();
}

void emit(json::Writer& w, const Node& n) {
  if (n.type == Node::kLeaf) {
    w.value_raw(n.leaf_json);
    return;
  }
  // A node made a list because its first key looked like an index is still
  // a dict when another key does not ({"0": .., "a": ..}).
  bool as_list = n.type == Node::kList;
  for (const auto& kv : n.children) as_list = as_list && is_index(kv.first);
  if (!as_list) {
    w.begin_object();
    for (const auto& kv : n.children) {
      w.key(kv.first);
      emit(w, *kv.second);
    }
    w.end_object();
    return;
  }
  // Positions without a recorded value (a non-tensor argument whose value
  // was not passed on) are written as null so indices keep their meaning.
  std::map<int64_t, const Node*> by_index;
  for (const auto& kv : n.children) by_index[std::stoll(kv.first)] = kv.second.get();
  w.begin_array();
  int64_t next = 0;
  for (const auto& kv : by_index) {
    for (; next < kv.first; ++next) w.value_null();
    emit(w, *kv.second);
    next = kv.first + 1;
  }
  w.end_array();
}

// The part of a backward record holding the gradients of the call's
// outputs (msprobe's name; its `output` holds the gradients of the inputs).
constexpr const char kBackwardInput[] = "input";

// Record kinds by name (the writer's names, wiring/backward.py):
// "Module.a.Linear.backward.0", "Functional.linear.0.backward" and
// "Module.a.Linear.parameters_grad.0".
bool name_part_at(std::string_view name, std::string_view part, bool index_after) {
  // `part` as the last component, or followed by one all-digit component
  // (index_after) / preceded by one (otherwise).
  const std::string dotted = "." + std::string(part);
  if (name.size() > dotted.size() && name.substr(name.size() - dotted.size()) == dotted) {
    if (!index_after) {
      const std::string_view head = name.substr(0, name.size() - dotted.size());
      const size_t dot = head.rfind('.');
      return dot != std::string_view::npos && is_index(std::string(head.substr(dot + 1)));
    }
    return false;
  }
  if (!index_after) return false;
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || !is_index(std::string(name.substr(dot + 1)))) return false;
  const std::string_view head = name.substr(0, dot);
  return head.size() > dotted.size() && head.substr(head.size() - dotted.size()) == dotted;
}

}  // namespace

bool is_backward(std::string_view name) {
  if (name_part_at(name, "backward", true) || name_part_at(name, "backward", false)) return true;
  // A repeated backward pass over one forward call (retain_graph):
  // "Module.a.Linear.backward_pass1.0", "Functional.linear.0.backward_pass1"
  // (identity/call_assembly.cpp).
  auto is_pass = [](std::string_view w) {
    constexpr std::string_view kPass = "backward_pass";
    return w.size() > kPass.size() && w.substr(0, kPass.size()) == kPass && is_index(std::string(w.substr(kPass.size())));
  };
  const size_t last_dot = name.rfind('.');
  if (last_dot == std::string_view::npos) return false;
  const std::string_view last = name.substr(last_dot + 1), head = name.substr(0, last_dot);
  const size_t dot = head.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view second = head.substr(dot + 1);
  return (is_pass(second) && is_index(std::string(last))) || (is_pass(last) && is_index(std::string(second)));
}

bool is_params_grad(std::string_view name) { return name_part_at(name, "parameters_grad", true); }

std::string build_dump_json(const std::string& task, const std::string& level, const std::vector<CallRecord>& calls,
                            const std::string& dump_data_dir) {
  json::Writer w(1);
  w.begin_object();
  w.key(dump_keys::kTask);
  w.value_string(task);
  w.key(dump_keys::kLevel);
  w.value_string(level);
  w.key(dump_keys::kFramework);
  w.value_string("pytorch");
  w.key(dump_keys::kDumpDataDir);
  if (dump_data_dir.empty()) w.value_null();
  else w.value_string(dump_data_dir);
  w.key(dump_keys::kData);
  w.begin_object();
  for (const CallRecord& c : calls) {
    // Values in argument order: tensors and non-tensor leaves interleaved
    // as the call passed them, so dicts keep their keys' order.
    std::vector<std::pair<int64_t, std::pair<const Place*, std::string>>> values;
    for (const TensorRow& r : c.tensors) values.push_back({r.order, {&r.place, tensor_leaf(r)}});
    for (const Leaf& l : c.leaves) values.push_back({l.order, {&l.place, leaf_json(l)}});
    std::stable_sort(values.begin(), values.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    Node root;
    root.type = Node::kDict;
    for (auto& v : values)
      if (!v.second.first->empty()) insert(&root, *v.second.first, std::move(v.second.second));

    w.key(c.name);
    w.begin_object();
    // A parameter-gradient record is one dict of parameter names, each a
    // list of one tensor, as msprobe writes it.
    if (is_params_grad(c.name)) {
      for (const auto& kv : root.children) {
        w.key(kv.first);
        emit(w, *kv.second);
      }
      w.end_object();
      continue;
    }
    // Fixed part order, each part present (empty when it holds no tensor);
    // module records also carry `parameters`, as msprobe's do. A backward
    // record holds `input` (gradients of the call's outputs) and `output`
    // (gradients of its inputs), as msprobe's eager dumper writes it.
    const bool is_module = c.name.rfind("Module.", 0) == 0;
    const bool backward = is_backward(c.name);
    const std::initializer_list<std::string_view> forward_parts = {dump_keys::kInputArgs, dump_keys::kInputKwargs,
                                                                   dump_keys::kOutput, dump_keys::kParameters};
    const std::initializer_list<std::string_view> backward_parts = {kBackwardInput, dump_keys::kOutput};
    for (const std::string_view part : backward ? backward_parts : forward_parts) {
      const bool is_dict = part == dump_keys::kInputKwargs || part == dump_keys::kParameters;
      if (!is_module && part == dump_keys::kParameters) continue;
      w.key(part);
      Node* found = nullptr;
      for (const auto& kv : root.children)
        if (kv.first == part) found = kv.second.get();
      if (!found) {
        w.value_raw(is_dict ? "{}" : "[]");
        continue;
      }
      // input_kwargs and parameters are dicts even when every key looks like an index.
      if (is_dict) found->type = Node::kDict;
      emit(w, *found);
    }
    w.end_object();
  }
  w.end_object();
  w.end_object();
  std::string out = w.take();
  out.push_back('\n');
  return out;
}

}  // namespace graphprobe
