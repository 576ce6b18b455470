#include "compare/dump_reader.h"

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

// Builds the JSON path of the value being read, for messages only.
class Walker {
 public:
  Walker(const std::string& source, Dump& dump) : source_(source), dump_(dump) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw DumpFormatError(source_ + ": " + path + ": " + what);
  }

  void entry(const std::string& name, const Value& v) {
    const std::string path = "data[" + json::quote(name) + "]";
    if (!v.is_object()) fail(path, std::string("expected an object, found ") + Value::kind_name(v.kind()));
    const auto entry_index = static_cast<uint32_t>(dump_.entries.size());
    dump_.entries.push_back(name);
    // Forward entries have input_args/input_kwargs; backward ones `input`.
    for (const char* part : {"input_args", "input", "input_kwargs", "output"}) {
      const Value* p = v.find(part);
      if (!p || p->is_null()) continue;
      const Role role = std::strcmp(part, "output") == 0 ? Role::kOutput : Role::kInput;
      const std::string prefix = name + (role == Role::kOutput ? ".output" : ".input");
      const std::string ppath = path + "." + part;
      if (std::strcmp(part, "input_kwargs") == 0) {
        if (!p->is_object()) fail(ppath, std::string("expected an object, found ") + Value::kind_name(p->kind()));
      } else if (p->is_object() && p->find("type")) {
        // A single record where a list is expected: read as element 0.
        leaf(*p, prefix + ".0", ppath, entry_index, role);
        continue;
      } else if (!p->is_array()) {
        fail(ppath, std::string("expected a list, found ") + Value::kind_name(p->kind()));
      }
      children(*p, prefix, ppath, entry_index, role);
    }
  }

 private:
  void children(const Value& v, const std::string& prefix, const std::string& path, uint32_t entry, Role role) {
    const auto& items = v.items();
    for (size_t i = 0; i < items.size(); ++i) {
      if (v.is_array()) {
        node(items[i], prefix + "." + std::to_string(i), path + "[" + std::to_string(i) + "]", entry, role);
      } else {
        const std::string& k = v.keys()[i];
        node(items[i], prefix + "." + k, path + "[" + json::quote(k) + "]", entry, role);
      }
    }
  }

  void node(const Value& v, const std::string& name, const std::string& path, uint32_t entry, Role role) {
    switch (v.kind()) {
      case Value::Kind::kNull: return;
      case Value::Kind::kArray: children(v, name, path, entry, role); return;
      case Value::Kind::kObject:
        // A dict without "type" is a container (nested kwargs, dict outputs).
        if (v.find("type")) leaf(v, name, path, entry, role);
        else children(v, name, path, entry, role);
        return;
      default:
        fail(path, std::string("expected a record, a list, an object or null, found ") + Value::kind_name(v.kind()));
    }
  }

  static bool is_tensor_type(const std::string& t) {
    // torch.Tensor, torch.nn.parameter.Parameter, and other frameworks' *.Tensor.
    return t.size() >= 6 && (t.compare(t.size() - 6, 6, "Tensor") == 0 || t == "torch.nn.parameter.Parameter");
  }

  void leaf(const Value& v, const std::string& name, const std::string& path, uint32_t entry, Role role) {
    const Value* type = v.find("type");
    if (!type->is_string()) fail(path + ".type", std::string("expected a string, found ") + Value::kind_name(type->kind()));
    if (!is_tensor_type(type->as_string())) return;  // non-tensor argument

    TensorRecord r;
    r.name = name;
    r.entry = entry;
    r.role = role;
    const Value* dtype = v.find("dtype");
    if (!dtype) fail(path, "tensor record without \"dtype\"");
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
      if (st->is_number()) r.stats[s] = st->as_number();
      else if (st->is_bool()) r.stats[s] = st->as_bool() ? 1.0 : 0.0;  // bool tensors: Max = any, Min = all
      else fail(path + "." + kStatKeys[s], std::string("expected a number or null, found ") + Value::kind_name(st->kind()));
    }
    dump_.rows.push_back(std::move(r));
  }

  const std::string& source_;
  Dump& dump_;
};

}  // namespace

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

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
