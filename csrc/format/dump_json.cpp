#include "format/dump_json.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <utility>

#include "format/json_writer.h"

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

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

Node* child(Node* parent, const std::string& key, Node::Type type) {
  for (auto& kv : parent->children)
    if (kv.first == key) return kv.second.get();
  parent->children.emplace_back(key, std::make_unique<Node>());
  Node* n = parent->children.back().second.get();
  n->type = type;
  return n;
}

void insert(Node* root, const std::vector<std::string>& path, std::string leaf_json) {
  Node* cur = root;
  for (size_t i = 0; i < path.size(); ++i) {
    const bool last = i + 1 == path.size();
    Node::Type t = last ? Node::kLeaf : (is_index(path[i + 1]) ? Node::kList : Node::kDict);
    cur = child(cur, path[i], t);
  }
  cur->leaf_json = std::move(leaf_json);
}

// A non-tensor leaf "type:raw" as msprobe writes it: {"type": "int", "value": 3}.
std::string scalar_leaf(const std::string& type, const std::string& raw) {
  json::Writer w(0);
  w.begin_object();
  w.key("type");
  w.value_string(type);
  if (type == "int" || type == "float") {
    double v = 0;
    bool ok = true;
    if (raw == "nan") v = NAN;
    else if (raw == "inf") v = INFINITY;
    else if (raw == "-inf") v = -INFINITY;
    else {
      try {
        size_t used = 0;
        v = std::stod(raw, &used);
        ok = used == raw.size();
      } catch (const std::exception&) {
        ok = false;
      }
    }
    w.key("value");
    if (!ok) w.value_string(raw);
    else if (type == "int" && std::isfinite(v) && std::fabs(v) < 9.0e15) w.value_integer(static_cast<int64_t>(v));
    else w.value_number(v);
  } else if (type == "bool") {
    w.key("value");
    w.value_bool(raw == "True");
  } else if (type == "NoneType") {
    w.key("value");
    w.value_null();
  } else if (type == "str") {
    w.key("value");
    w.value_string(raw);
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
  w.key("type");
  w.value_string("torch.Tensor");
  w.key("dtype");
  w.value_string(r.dtype);
  w.key("shape");
  w.begin_array();
  for (int64_t d : r.shape) w.value_integer(d);
  w.end_array();
  const bool has_stats = r.numel > 0 && r.kind != ValueKind::kNoStats;
  const bool nan = r.nan_count > 0;
  w.key("Max");
  if (!has_stats) w.value_null();
  else if (nan) w.value_number(NAN);
  else write_stat(w, r, r.max);
  w.key("Min");
  if (!has_stats) w.value_null();
  else if (nan) w.value_number(NAN);
  else write_stat(w, r, r.min);
  // msprobe leaves Mean and Norm empty for bool tensors.
  const bool has_moments = has_stats && r.kind != ValueKind::kBoolean;
  w.key("Mean");
  if (!has_moments) w.value_null();
  else w.value_number(nan ? NAN : r.sum / static_cast<double>(r.numel));
  w.key("Norm");
  if (!has_moments) w.value_null();
  else w.value_number(nan ? NAN : std::sqrt(r.sumsq));
  w.key("requires_grad");
  w.value_bool(r.requires_grad);
  if (!r.data_name.empty()) {
    w.key("data_name");
    w.value_string(r.data_name);
  }
  if (r.writes > 1) {
    w.key("write_count");
    w.value_integer(r.writes);
  }
  w.end_object();
  return w.take();
}

void emit(json::Writer& w, const Node& n) {
  switch (n.type) {
    case Node::kLeaf:
      w.value_raw(n.leaf_json);
      return;
    case Node::kDict:
      w.begin_object();
      for (const auto& kv : n.children) {
        w.key(kv.first);
        emit(w, *kv.second);
      }
      w.end_object();
      return;
    case Node::kList: {
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
      return;
    }
  }
}

struct Call {
  std::string name;
  Node root;
  size_t last_row = 0;  // position of its last row: calls are listed as they complete
  bool overwritten = false;
  std::map<std::string, bool> parts_with_extras;
};

}  // namespace

std::string entry_name(const std::string& entry_template, int64_t n) {
  std::string out = entry_template;
  const auto pos = out.find("{n}");
  if (pos == std::string::npos) return out + "." + std::to_string(n);
  out.replace(pos, 3, std::to_string(n));
  return out;
}

CallGrouping group_calls(const std::vector<TensorRow>& rows) {
  // The open (latest) call of each entry.
  struct Open {
    size_t call = 0;
    int64_t started = 0;
    std::set<std::string> places;
    bool has_output = false;
  };
  std::map<std::string, Open> open;
  CallGrouping g;
  g.row_call.reserve(rows.size());
  for (const TensorRow& r : rows) {
    const bool is_output = r.place.rfind("output", 0) == 0;
    auto found = open.find(r.entry);
    const bool new_call = found == open.end() || found->second.places.count(r.place) > 0 ||
                          (!is_output && found->second.has_output);
    if (new_call) {
      Open& o = open[r.entry];
      o.call = g.names.size();
      o.places.clear();
      o.has_output = false;
      g.names.push_back(entry_name(r.entry, o.started++));
      found = open.find(r.entry);
    }
    found->second.places.insert(r.place);
    found->second.has_output = found->second.has_output || is_output;
    g.row_call.push_back(found->second.call);
  }
  return g;
}

std::string io_name(const std::string& place) {
  const auto dot = place.find('.');
  const std::string part = place.substr(0, dot);
  const std::string rest = dot == std::string::npos ? "" : place.substr(dot);
  if (part == "input_args" || part == "input_kwargs") return "input" + rest;
  return part + rest;
}

std::string build_dump_json(const std::string& task, const std::string& level, const std::vector<TensorRow>& rows,
                            DumpSummary* summary, const std::string& dump_data_dir) {
  const CallGrouping grouping = group_calls(rows);
  std::vector<Call> calls(grouping.names.size());
  for (size_t k = 0; k < calls.size(); ++k) {
    calls[k].name = grouping.names[k];
    calls[k].root.type = Node::kDict;
  }

  for (size_t i = 0; i < rows.size(); ++i) {
    const TensorRow& r = rows[i];
    Call& c = calls[grouping.row_call[i]];
    c.last_row = i;
    c.overwritten = c.overwritten || r.writes > 1;
    insert(&c.root, split(r.place, '.'), tensor_leaf(r));

    const std::string part = r.place.substr(0, r.place.find('.'));
    if (!r.extras.empty() && !c.parts_with_extras[part]) {
      c.parts_with_extras[part] = true;
      // extras: records separated by \x1e, fields (path, type, raw) by \x1f.
      for (const std::string& rec : split(r.extras, '\x1e')) {
        auto f = split(rec, '\x1f');
        if (f.size() != 3 || f[0].empty()) continue;
        insert(&c.root, split(f[0], '.'), scalar_leaf(f[1], f[2]));
      }
    }
  }

  std::vector<Call*> order;
  order.reserve(calls.size());
  for (Call& c : calls) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(), [](const Call* a, const Call* b) { return a->last_row < b->last_row; });

  json::Writer w(1);
  w.begin_object();
  w.key("task");
  w.value_string(task);
  w.key("level");
  w.value_string(level);
  w.key("framework");
  w.value_string("pytorch");
  w.key("dump_data_dir");
  if (dump_data_dir.empty()) w.value_null();
  else w.value_string(dump_data_dir);
  w.key("data");
  w.begin_object();
  for (Call* c : order) {
    w.key(c->name);
    w.begin_object();
    // Fixed part order, each part present (empty when it holds no tensor).
    for (const char* part : {"input_args", "input_kwargs", "output"}) {
      const bool is_dict = std::string(part) == "input_kwargs";
      w.key(part);
      Node* found = nullptr;
      for (const auto& kv : c->root.children)
        if (kv.first == part) found = kv.second.get();
      if (!found) {
        w.value_raw(is_dict ? "{}" : "[]");
        continue;
      }
      // input_kwargs is a dict even when every key looks like an index.
      if (is_dict) found->type = Node::kDict;
      emit(w, *found);
    }
    w.end_object();
    if (summary && c->overwritten) summary->overwritten.push_back(c->name);
  }
  w.end_object();
  w.end_object();
  if (summary) {
    summary->entries = static_cast<int64_t>(calls.size());
    summary->tensors = static_cast<int64_t>(rows.size());
  }
  std::string out = w.take();
  out.push_back('\n');
  return out;
}

}  // namespace graphprobe
