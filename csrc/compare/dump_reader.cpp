#include "compare/dump_reader.h"

#include "compare/msprobe_values.h"

#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "format/json_reader.h"
#include "format/json_writer.h"
#include "fs/atomic_file.h"

namespace graphprobe::compare {
namespace {

using json::Value;

constexpr std::array<const char*, kNumStats> kStatKeys = {"Max", "Min", "Mean", "Norm"};

// Whether one of the last two dot-separated components of name is c.
bool in_last_two(const std::string& name, std::string_view c) {
  const size_t last = name.rfind('.');
  if (last == std::string::npos) return name == c;
  if (std::string_view(name).substr(last + 1) == c) return true;
  const size_t prev = last == 0 ? std::string::npos : name.rfind('.', last - 1);
  const size_t begin = prev == std::string::npos ? 0 : prev + 1;
  return std::string_view(name).substr(begin, last - begin) == c;
}

std::string last_component(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

// Walks one dump's `data`, appending rows; the JSON path of the value being
// read is carried along for messages only.
class Walker {
 public:
  Walker(const std::string& source, Dump& dump) : source_(source), dump_(dump) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw DumpFormatError(source_ + ": " + path + ": " + what);
  }

  void entry(const std::string& name, const Value& v) {
    const std::string path = "data[" + json::quote(name) + "]";
    if (!v.is_object()) fail(path, std::string("expected an object, found ") + Value::kind_name(v.kind()));
    entry_ = static_cast<uint32_t>(dump_.entries.size());
    dump_.entries.push_back(name);
    // msprobe's read_op: a parameters_grad entry is one structure of
    // records, named without list positions.
    if (in_last_two(name, "parameters_grad")) {
      keep_positions_ = false;
      role_ = Role::kInput;
      children(v, name, path);
      keep_positions_ = true;
      return;
    }
    // Parameters come before outputs, as msprobe orders them (reorder_index).
    struct Part {
      const char* key;
      const char* row;
      Role role;
    };
    static constexpr Part kParts[] = {{"input_args", ".input", Role::kInput},
                                      {"input_kwargs", ".input", Role::kInput},
                                      {"input", ".input", Role::kInput},
                                      {"parameters", ".parameters", Role::kInput},
                                      {"output", ".output", Role::kOutput}};
    for (const Part& part : kParts) {
      const Value* p = v.find(part.key);
      if (!p) continue;
      role_ = part.role;
      node(*p, name + part.row, path + "." + part.key);
    }
  }

 private:
  void children(const Value& v, const std::string& prefix, const std::string& path) {
    const auto& items = v.items();
    for (size_t i = 0; i < items.size(); ++i) {
      if (v.is_array()) {
        node(items[i], keep_positions_ ? prefix + "." + std::to_string(i) : prefix,
             path + "[" + std::to_string(i) + "]");
      } else {
        const std::string& k = v.keys()[i];
        node(items[i], prefix + "." + k, path + "[" + json::quote(k) + "]");
      }
    }
  }

  void node(const Value& v, const std::string& name, const std::string& path) {
    switch (v.kind()) {
      case Value::Kind::kNull: placeholder(name); return;
      case Value::Kind::kArray: children(v, name, path); return;
      case Value::Kind::kObject: {
        if (const Value* ct = v.find("class_type"); ct && ct->is_string() && ct->as_string() == "torch.distributed.P2POp") {
          // A P2POp is judged by the tensor it carries.
          const Value* t = v.find("tensor");
          if (t && t->is_object() && t->find("type")) leaf(*t, name, path + ".tensor");
          else placeholder(name);
          return;
        }
        // A dict without "type" is a container (nested kwargs, dict outputs).
        if (v.find("type")) leaf(v, name, path);
        else children(v, name, path);
        return;
      }
      default:
        fail(path, std::string("expected a record, a list, an object or null, found ") + Value::kind_name(v.kind()));
    }
  }

  TensorRecord record(const std::string& name) const {
    TensorRecord r;
    r.name = name;
    r.entry = entry_;
    r.role = role_;
    return r;
  }

  // msprobe's default item: a null where a value was expected.
  void placeholder(const std::string& name) {
    TensorRecord r = record(name);
    r.is_tensor = false;
    r.dtype = "N/A";
    r.shape_text = "N/A";
    dump_.rows.push_back(std::move(r));
  }

  // The four statistics of a non-tensor record: its value.
  void value_stats(TensorRecord& r, const Value* value) {
    ValueKind k = ValueKind::kNone;
    double number = 0;
    if (!value || value->is_null()) {
      k = ValueKind::kNone;
    } else if (value->is_bool()) {
      k = ValueKind::kBool;
      number = value->as_bool() ? 1.0 : 0.0;
    } else if (value->is_number()) {
      k = value->is_integer_literal() ? ValueKind::kInt : ValueKind::kFloat;
      number = value->as_number();
    } else {
      k = ValueKind::kText;
      r.text = value->is_string() ? value->as_string() : python_repr(*value);
    }
    for (int s = 0; s < kNumStats; ++s) {
      r.kinds[s] = k;
      if (k == ValueKind::kInt || k == ValueKind::kFloat) r.stats[s] = number;
      if (k == ValueKind::kBool) r.stats[s] = number;
    }
  }

  static const char* python_type(const Value* v) {
    if (!v || v->is_null()) return "NoneType";
    switch (v->kind()) {
      case Value::Kind::kBool: return "bool";
      case Value::Kind::kNumber: return v->is_integer_literal() ? "int" : "float";
      case Value::Kind::kString: return "str";
      case Value::Kind::kArray: return "list";
      default: return "dict";
    }
  }

  // gen_op_item's special cases for records without a dtype.
  void value_leaf(const Value& v, const std::string& type, const std::string& name, const std::string& path) {
    TensorRecord r = record(name);
    r.is_tensor = false;
    const Value* value = v.find("value");
    const std::string last = last_component(name);
    if (type == "torch.Size") {
      r.dtype = type;
      if (!value || !value->is_array()) fail(path + ".value", "expected a list of sizes");
      for (size_t i = 0; i < value->items().size(); ++i) {
        const Value& d = value->items()[i];
        if (!d.is_integer_literal()) fail(path + ".value[" + std::to_string(i) + "]", "expected an integer");
        r.shape.push_back(static_cast<int64_t>(d.as_number()));
      }
      value_stats(r, nullptr);
    } else if (type == "slice") {
      r.dtype = type;
      r.shape_text = value && value->is_array() ? "(" + std::to_string(value->items().size()) + ",)" : "()";
      value_stats(r, nullptr);
    } else if (type == "ellipsis") {
      r.dtype = type;
      value_stats(r, value);
    } else if (last == "src" || last == "dst" || last == "group_src" || last == "group_dst" ||
               type == "torch.ProcessGroup") {
      // Ranks and groups are compared as their text.
      r.dtype = type;
      const Value* shown = type == "torch.ProcessGroup" ? v.find("group_ranks") : value;
      value_stats(r, nullptr);
      for (auto& k : r.kinds) k = ValueKind::kText;
      r.text = shown ? (shown->is_string() ? shown->as_string() : python_repr(*shown)) : "None";
    } else {
      r.dtype = std::string("<class '") + python_type(value) + "'>";
      value_stats(r, value);
    }
    if (const Value* rg = v.find("requires_grad"); rg && rg->is_bool()) r.requires_grad = rg->as_bool();
    dump_.rows.push_back(std::move(r));
  }

  void leaf(const Value& v, const std::string& name, const std::string& path) {
    const Value* type = v.find("type");
    if (!type->is_string()) fail(path + ".type", std::string("expected a string, found ") + Value::kind_name(type->kind()));
    const Value* dtype = v.find("dtype");
    const std::string& t = type->as_string();
    const bool tensor_type = t.size() >= 6 && (t.compare(t.size() - 6, 6, "Tensor") == 0 || t == "torch.nn.parameter.Parameter");
    if (tensor_type && !dtype) fail(path, "tensor record without \"dtype\"");
    // msprobe treats a record with a dtype as data (tensors, numpy arrays)
    // and anything else as a value.
    if (!dtype || dtype->is_null() || (dtype->is_string() && dtype->as_string().empty())) {
      value_leaf(v, type->as_string(), name, path);
      return;
    }
    TensorRecord r = record(name);
    if (!dtype->is_string()) fail(path + ".dtype", std::string("expected a string, found ") + Value::kind_name(dtype->kind()));
    r.dtype = dtype->as_string();

    const Value* shape = v.find("shape");
    if (!shape) fail(path, "tensor record without \"shape\"");
    if (!shape->is_array()) fail(path + ".shape", std::string("expected a list, found ") + Value::kind_name(shape->kind()));
    for (size_t i = 0; i < shape->items().size(); ++i) {
      const Value& d = shape->items()[i];
      if (!d.is_integer_literal() || d.as_number() < 0 || d.as_number() > 9.0e18)
        fail(path + ".shape[" + std::to_string(i) + "]", "expected a non-negative integer");
      r.shape.push_back(static_cast<int64_t>(d.as_number()));
    }

    if (const Value* rg = v.find("requires_grad"); rg && !rg->is_null()) {
      if (!rg->is_bool()) fail(path + ".requires_grad", std::string("expected true or false, found ") + Value::kind_name(rg->kind()));
      r.requires_grad = rg->as_bool();
    }

    if (const Value* dn = v.find("data_name"); dn && !dn->is_null()) {
      if (!dn->is_string()) fail(path + ".data_name", std::string("expected a string, found ") + Value::kind_name(dn->kind()));
      r.data_name = dn->as_string();
    }

    for (int s = 0; s < kNumStats; ++s) {
      const Value* st = v.find(kStatKeys[s]);
      if (!st || st->is_null()) continue;
      if (st->is_number()) {
        r.stats[s] = st->as_number();
        r.kinds[s] = st->is_integer_literal() ? ValueKind::kInt : ValueKind::kFloat;
      } else if (st->is_bool()) {
        r.stats[s] = st->as_bool() ? 1.0 : 0.0;  // bool tensors: Max = any, Min = all
        r.kinds[s] = ValueKind::kBool;
      } else {
        fail(path + "." + kStatKeys[s], std::string("expected a number or null, found ") +
                                            Value::kind_name(st->kind()));
      }
    }
    dump_.rows.push_back(std::move(r));
  }

  const std::string& source_;
  Dump& dump_;
  uint32_t entry_ = 0;
  Role role_ = Role::kInput;
  bool keep_positions_ = true;
};

}  // namespace

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

std::string shape_of(const TensorRecord& r) { return r.shape_text.empty() ? shape_str(r.shape) : r.shape_text; }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Dump parse_dump(std::string_view text, const std::string& source) {
  Dump dump;
  dump.source = source;
  Value doc;
  try {
    doc = json::parse(text);
  } catch (const json::ParseError& e) {
    throw DumpFormatError(source + ":" + e.what());
  }
  Walker w(source, dump);
  if (!doc.is_object()) w.fail("(top level)", std::string("expected an object, found ") + Value::kind_name(doc.kind()));
  const Value* data = doc.find("data");
  if (!data) w.fail("(top level)", "no \"data\" key: not a dump.json");
  if (!data->is_object()) w.fail("data", std::string("expected an object, found ") + Value::kind_name(data->kind()));
  if (const Value* task = doc.find("task"); task && task->is_string()) dump.task = task->as_string();
  for (size_t i = 0; i < data->keys().size(); ++i) w.entry(data->keys()[i], data->items()[i]);
  return dump;
}

Dump read_dump(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rbe"), &std::fclose);
  if (!f) throw fs::IoError("graphprobe: cannot open '" + path + "': " + std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) text.append(buf, n);
  if (std::ferror(f.get())) throw fs::IoError("graphprobe: cannot read '" + path + "': " + std::strerror(errno));
  return parse_dump(text, path);
}

}  // namespace graphprobe::compare
