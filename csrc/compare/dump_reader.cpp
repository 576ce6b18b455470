#include "compare/dump_reader.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <unordered_set>

#include "compare/direct_entry.h"
#include "compare/huge_pages.h"
#include "compare/msprobe_values.h"
#include "compare/text_feed.h"
#include "format/json_reader.h"
#include "format/json_writer.h"
#include "fs/atomic_file.h"
#include "record/dump_keys.h"

namespace graphprobe::compare {
namespace {

using json::Value;
namespace keys = graphprobe::dump_keys;

constexpr std::array<const char*, kNumStats> kStatKeys = {keys::kMax, keys::kMin, keys::kMean, keys::kNorm};

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

// Where a value sits in the document, for messages only: a chain of
// frames on the walker's stack, spelled out (data["..."].output[0]) only
// when a message needs it, so that reading builds no path strings.
struct Path {
  enum class Kind : uint8_t { kEntry, kField, kIndex, kKey };
  const Path* parent = nullptr;
  Kind kind = Kind::kField;
  std::string_view text;  // entry name, field or key
  size_t index = 0;

  Path field(std::string_view f) const { return {this, Kind::kField, f, 0}; }
  Path at(size_t i) const { return {this, Kind::kIndex, {}, i}; }
  Path key(std::string_view k) const { return {this, Kind::kKey, k, 0}; }

  std::string str() const {
    std::string out = parent ? parent->str() : std::string();
    switch (kind) {
      case Kind::kEntry: out += "data[" + json::quote(std::string(text)) + "]"; break;
      case Kind::kField: out += "."; out += text; break;
      case Kind::kIndex: out += "[" + std::to_string(index) + "]"; break;
      case Kind::kKey: out += "[" + json::quote(std::string(text)) + "]"; break;
    }
    return out;
  }
};

// Walks one dump's `data`, appending rows; the place of the value being
// read is carried along (Path) for messages only.
class Walker final : public SubtreeRows {
 public:
  Walker(const std::string& source, Dump& dump) : source_(source), dump_(dump) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw DumpFormatError(source_ + ": " + path + ": " + what);
  }
  [[noreturn]] void fail(const Path& path, const std::string& what) const { fail(path.str(), what); }

  void entry(const std::string& name, const Value& v) {
    const Path path{nullptr, Path::Kind::kEntry, name, 0};
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
    for (const EntryPart& part : kEntryParts) {
      const Value* p = v.find(part.key);
      if (!p) continue;
      role_ = part.role;
      node(*p, name + part.row, path.field(part.key));
    }
  }

  // One value of entry `entry` that the direct reader (direct_entry.h) left
  // to the tree: the rows it gives, as entry() would make them.
  void subtree(const Value& v, const std::string& name, uint32_t entry, Role role, bool keep_positions) override {
    entry_ = entry;
    role_ = role;
    keep_positions_ = keep_positions;
    const Path path{nullptr, Path::Kind::kEntry, dump_.entries[entry], 0};
    node(v, name, path.field("(value)"));
    keep_positions_ = true;
  }

 private:
  void children(const Value& v, const std::string& prefix, const Path& path) {
    const auto& items = v.items();
    for (size_t i = 0; i < items.size(); ++i) {
      if (v.is_array()) {
        node(items[i], keep_positions_ ? prefix + "." + std::to_string(i) : prefix, path.at(i));
      } else {
        const std::string& k = v.keys()[i];
        node(items[i], prefix + "." + k, path.key(k));
      }
    }
  }

  void node(const Value& v, const std::string& name, const Path& path) {
    switch (v.kind()) {
      case Value::Kind::kNull: placeholder(name); return;
      case Value::Kind::kArray: children(v, name, path); return;
      case Value::Kind::kObject: {
        if (const Value* ct = v.find("class_type"); ct && ct->is_string() && ct->as_string() == "torch.distributed.P2POp") {
          // A P2POp is judged by the tensor it carries.
          const Value* t = v.find("tensor");
          if (t && t->is_object() && t->find(keys::kType)) leaf(*t, name, path.field("tensor"));
          else placeholder(name);
          return;
        }
        // A dict without "type" is a container (nested kwargs, dict outputs).
        if (v.find(keys::kType)) leaf(v, name, path);
        else children(v, name, path);
        return;
      }
      default:
        fail(path, std::string("expected a record, a list, an object or null, found ") + Value::kind_name(v.kind()));
    }
  }

  TensorRecord record(const std::string& name) const {
    TensorRecord r;
    r.name = dump_.arena->keep(name);
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
  void value_leaf(const Value& v, const std::string& type, const std::string& name, const Path& path) {
    TensorRecord r = record(name);
    r.is_tensor = false;
    const Value* value = v.find(keys::kValue);
    const std::string last = last_component(name);
    if (type == "torch.Size") {
      r.dtype = type;
      if (!value || !value->is_array()) fail(path.field("value"), "expected a list of sizes");
      std::vector<int64_t> sizes;
      for (size_t i = 0; i < value->items().size(); ++i) {
        const Value& d = value->items()[i];
        if (!d.is_integer_literal()) fail(path.field("value").at(i), "expected an integer");
        sizes.push_back(static_cast<int64_t>(d.as_number()));
      }
      r.shape = dump_.arena->keep(sizes);
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
    if (const Value* rg = v.find(keys::kRequiresGrad); rg && rg->is_bool()) r.requires_grad = rg->as_bool();
    dump_.rows.push_back(std::move(r));
  }

  void leaf(const Value& v, const std::string& name, const Path& path) {
    const Value* type = v.find(keys::kType);
    if (!type->is_string()) fail(path.field("type"), std::string("expected a string, found ") + Value::kind_name(type->kind()));
    const Value* dtype = v.find(keys::kDtype);
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
    if (!dtype->is_string()) fail(path.field("dtype"), std::string("expected a string, found ") + Value::kind_name(dtype->kind()));
    r.dtype = dtype->as_string();

    const Value* shape = v.find(keys::kShape);
    if (!shape) fail(path, "tensor record without \"shape\"");
    if (!shape->is_array()) fail(path.field("shape"), std::string("expected a list, found ") + Value::kind_name(shape->kind()));
    std::vector<int64_t> sizes;
    sizes.reserve(shape->items().size());
    for (size_t i = 0; i < shape->items().size(); ++i) {
      const Value& d = shape->items()[i];
      if (!d.is_integer_literal() || d.as_number() < 0 || d.as_number() > 9.0e18)
        fail(path.field("shape").at(i), "expected a non-negative integer");
      sizes.push_back(static_cast<int64_t>(d.as_number()));
    }
    r.shape = dump_.arena->keep(sizes);

    if (const Value* rg = v.find(keys::kRequiresGrad); rg && !rg->is_null()) {
      if (!rg->is_bool()) fail(path.field("requires_grad"), std::string("expected true or false, found ") + Value::kind_name(rg->kind()));
      r.requires_grad = rg->as_bool();
    }

    if (const Value* dn = v.find(keys::kDataName); dn && !dn->is_null()) {
      if (!dn->is_string()) fail(path.field("data_name"), std::string("expected a string, found ") + Value::kind_name(dn->kind()));
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
        fail(path.field(kStatKeys[s]), std::string("expected a number or null, found ") + Value::kind_name(st->kind()));
      }
    }
    if (const Value* sk = v.find(keys::kSketch); sk && !sk->is_null()) {
      if (!sk->is_array() || sk->items().size() != 4)
        fail(path.field(keys::kSketch), "expected a list of 4 numbers");
      std::array<double, 4> values{};
      for (size_t k = 0; k < 4; ++k) {
        const Value& x = sk->items()[k];
        if (!x.is_number())
          fail(path.field(keys::kSketch).at(k), std::string("expected a number, found ") + Value::kind_name(x.kind()));
        values[k] = x.as_number();
      }
      r.sketch = static_cast<int32_t>(dump_.sketches.size());
      dump_.sketches.push_back(values);
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

namespace {

constexpr size_t kMaxNotes = 20;

void add_note(Dump& dump, size_t& count, std::string text) {
  if (count++ < kMaxNotes) dump.notes.push_back(dump.source + ": " + std::move(text));
}

// One note per object with repeated keys (a record, an entry, the document).
void note_duplicates(Dump& dump, size_t& count, const std::vector<json::DuplicateKey>& dups, const std::string& where) {
  if (dups.empty()) return;
  std::string keys;
  for (size_t i = 0; i < dups.size() && i < 5; ++i)
    keys += (i ? ", " : "") + json::quote(dups[i].key) + " (line " + std::to_string(dups[i].line) + ")";
  if (dups.size() > 5) keys += ", ...";
  add_note(dump, count, "in " + where + ", key(s) " + keys + " appear again; the last value is used");
}

// Entries that appear more than once in "data": the last one's records take
// the place of the first's, as Python's json.load gives.
void resolve_duplicate_entries(Dump& dump, size_t& note_count, const std::vector<std::pair<size_t, size_t>>& lines) {
  const size_t n = dump.entries.size();
  {
    // Nearly every dump has none: sorted 64-bit hashes of the names say so
    // at a fraction of the sort below (entry names share long prefixes,
    // which string compares walk again and again) and of a hash set (a node
    // per name). Equal hashes are looked at by name. std::hash reads eight
    // bytes a step (FNV-1a's byte loop took 1.7 times as long).
    std::vector<uint64_t> hashes(n);
    for (size_t i = 0; i < n; ++i) hashes[i] = std::hash<std::string_view>{}(dump.entries[i]);
    std::sort(hashes.begin(), hashes.end());
    if (std::adjacent_find(hashes.begin(), hashes.end()) == hashes.end()) return;
  }
  {
    std::unordered_set<std::string_view> seen;
    seen.reserve(n);
    bool repeated = false;
    for (const std::string& e : dump.entries)
      if (!seen.insert(e).second) {
        repeated = true;
        break;
      }
    if (!repeated) return;
  }
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return dump.entries[a] < dump.entries[b]; });
  std::vector<uint32_t> target(n);  // entry -> the entry whose place it takes; kDead when dropped
  constexpr uint32_t kDead = UINT32_MAX;
  for (uint32_t i = 0; i < n; ++i) target[i] = i;
  bool any = false;
  std::vector<std::string> front;  // these notes go first: they change which records are compared
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && dump.entries[order[e]] == dump.entries[order[g]]) ++e;
    if (e - g > 1) {
      any = true;
      for (size_t k = g; k + 1 < e; ++k) target[order[k]] = kDead;
      target[order[e - 1]] = order[g];
      std::string at;
      for (size_t k = g + 1; k < e; ++k) at += (at.empty() ? "" : ", ") + std::to_string(lines[order[k]].first);
      ++note_count;
      if (front.size() < kMaxNotes)
        front.push_back(dump.source + ": entry " + json::quote(dump.entries[order[g]]) + " appears " +
                        std::to_string(e - g) + " times in \"data\" (again at line " + at +
                        "); the last one is used, at the place of the first");
    }
    g = e;
  }
  if (!any) return;
  dump.notes.insert(dump.notes.begin(), front.begin(), front.end());
  if (dump.notes.size() > kMaxNotes) dump.notes.resize(kMaxNotes);
  // Renumber the entries that stay, in order of their (first) place.
  std::vector<uint32_t> renumber(n, kDead);
  std::vector<std::string> kept;
  std::vector<bool> is_place(n, false);
  for (uint32_t i = 0; i < n; ++i)
    if (target[i] != kDead) is_place[target[i]] = true;
  for (uint32_t i = 0; i < n; ++i)
    if (is_place[i]) {
      renumber[i] = static_cast<uint32_t>(kept.size());
      kept.push_back(std::move(dump.entries[i]));
    }
  std::vector<TensorRecord> rows;
  rows.reserve(dump.rows.size());
  for (TensorRecord& r : dump.rows) {
    if (target[r.entry] == kDead) continue;
    r.entry = renumber[target[r.entry]];
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const TensorRecord& a, const TensorRecord& b) { return a.entry < b.entry; });
  dump.rows = std::move(rows);
  dump.entries = std::move(kept);
}

// Runs one step of the stream; when it fails for lack of text (a feed not
// yet at the end), reads more and runs it again from where it started.
template <typename F>
auto retrying(json::ObjectStream& in, TextFeed* feed, F&& step) -> decltype(step()) {
  for (;;) {
    const json::ObjectStream::Mark mark = in.mark();
    try {
      return step();
    } catch (const json::ParseError&) {
      if (feed == nullptr || !feed->more()) throw;
      in.reset(mark);
    }
  }
}

// An entry holding one tensor record without "md5", as the checksum
// collector sees it: what it is told of an entry the direct reader read
// (it only counts such records, to know whether a later "md5" came late).
const json::Value& tensor_without_checksum() {
  static const json::Value v = json::parse(R"({"output": {"dtype": null, "shape": null}})");
  return v;
}

// Text behind the parser is given back in steps of this many bytes.
constexpr size_t kReleaseStep = size_t{8} << 20;

// Every record that becomes a row -- a tensor or a non-tensor value --
// holds "type": counting the key bounds the row count (null placeholders
// aside, which are few), so the rows are allocated once instead of growing
// (a grown vector briefly holds its old and new copies).
constexpr std::string_view kRowKey = "\"type\"";

size_t estimate_rows(std::string_view text) {
  size_t n = 0;
  for (size_t pos = text.find(kRowKey); pos != std::string_view::npos; pos = text.find(kRowKey, pos + kRowKey.size())) ++n;
  return n;
}

Dump parse(std::string_view text, const std::string& source, TextFeed* feed, bool all_checksums = false) {
  Dump dump;
  dump.source = source;
  Walker w(source, dump);
  DirectEntryReader direct(dump, w);
  // The second read for checksums (all_checksums) walks every entry's tree.
  bool direct_ok = !all_checksums;
  ChecksumCollector checksums(all_checksums);
  size_t note_count = 0;
  std::vector<json::DuplicateKey> dups;
  json::ParseOptions options;
  options.duplicates = &dups;
  try {
    json::ObjectStream in(text, options);
    json::Value scratch;
    // Enters the object at the cursor, or parses what is there instead.
    auto enter = [&] {
      if (in.enter_object()) return true;
      scratch = in.value();
      return false;
    };
    if (!retrying(in, feed, enter))
      w.fail("(top level)", std::string("expected an object, found ") + json::Value::kind_name(scratch.kind()));
    bool has_data = false;
    std::vector<std::pair<size_t, size_t>> entry_lines;
    std::string key;
    std::vector<std::string> top_keys;
    size_t released = 0;
    while (retrying(in, feed, [&] { return in.next_key(key); })) {
      if (std::find(top_keys.begin(), top_keys.end(), key) != top_keys.end()) {
        if (key != keys::kData)
          add_note(dump, note_count, "in the document, key " + json::quote(key) + " (line " +
                                         std::to_string(in.position().first) + ") appears again; the last value is used");
      } else if (top_keys.size() < 64) {
        top_keys.push_back(key);
      }
      if (key == keys::kData) {
        if (has_data) {
          add_note(dump, note_count, "key \"data\" appears again at line " + std::to_string(in.position().first) +
                                         "; the last one is used");
          dump.entries.clear();
          dump.rows.clear();
          entry_lines.clear();
          checksums.clear();
        }
        has_data = true;
        if (!retrying(in, feed, enter))
          w.fail("data", std::string("expected an object, found ") + json::Value::kind_name(scratch.kind()));
        if (dump.rows.capacity() == 0) {
          dump.rows.reserve(feed ? feed->count(kRowKey) : estimate_rows(text));
          advise_huge_pages(dump.rows.data(), dump.rows.capacity() * sizeof(TensorRecord));
        }
        std::string name;
        while (retrying(in, feed, [&] { return in.next_key(name); })) {
          entry_lines.push_back(in.position());
          bool direct_read = false;
          const json::Value entry = retrying(in, feed, [&] {
            dups.clear();
            if (direct_ok) {
              dump.entries.push_back(name);
              const size_t end = direct.read(in.text(), in.offset(), in.depth(), in_last_two(name, "parameters_grad"));
              if (end != DirectEntryReader::npos) {
                in.skip_to(end);
                direct_read = true;
                return json::Value();
              }
              dump.entries.pop_back();
            }
            return in.value();
          });
          const uint32_t index = static_cast<uint32_t>(dump.entries.size() - (direct_read ? 1 : 0));
          if (direct_read) {
            // What the checksum collector would have seen in its tree: tensor
            // records without "md5" (it only counts them).
            if (direct.saw_tensor()) checksums.entry(index, name, tensor_without_checksum());
          } else {
            if (!dups.empty()) note_duplicates(dump, note_count, dups, "data[" + json::quote(name) + "]");
            w.entry(name, entry);
            checksums.entry(index, name, entry);
            // From the first checksum on, the collector wants every entry's tree.
            bool tensor = false;
            if (direct_ok && entry.is_object())
              for (const json::Value& part : entry.items())
                if (holds_checksum(part, tensor)) direct_ok = false;
          }
          if (feed && in.offset() - released > kReleaseStep) {
            in.count_lines_to(in.offset());  // later messages still know their line
            released = in.offset();
            feed->release(released);
          }
        }
        continue;
      }
      const json::Value v = retrying(in, feed, [&] {
        dups.clear();
        return in.value();
      });
      if (!dups.empty()) note_duplicates(dump, note_count, dups, json::quote(key));
      if (key == keys::kTask) dump.task = v.is_string() ? v.as_string() : std::string();
    }
    retrying(in, feed, [&] {
      in.finish();
      return 0;
    });
    if (!has_data) w.fail("(top level)", "no \"data\" key: not a dump.json");
    dump.checksums = checksums.finish(dump.entries);  // before the entries' own duplicates are resolved
    resolve_duplicate_entries(dump, note_count, entry_lines);
  } catch (const json::ParseError& e) {
    throw DumpFormatError(source + ":" + e.what());
  }
  if (note_count > kMaxNotes)
    dump.notes.push_back(source + ": ... and " + std::to_string(note_count - kMaxNotes) + " more such notes");
  return dump;
}

}  // namespace

// A dump whose first "md5" came after records without one is read again,
// keeping every record's checksum from the start (rare: graphprobe's dumper
// writes "md5" in every tensor record or in none).
Dump parse_dump(std::string_view text, const std::string& source) {
  Dump dump = parse(text, source, nullptr);
  if (dump.checksums.needs_second_read) dump.checksums = parse(text, source, nullptr, true).checksums;
  return dump;
}

namespace {

// A parse of a file that shrank meanwhile is reported as that, whether it
// failed at the zeros it read or not.
template <typename F>
auto parse_intact(const TextFeed& feed, F&& parse_it) -> decltype(parse_it()) {
  try {
    auto out = parse_it();
    feed.check_intact();
    return out;
  } catch (const DumpFormatError&) {
    feed.check_intact();
    throw;
  } catch (const json::ParseError&) {
    feed.check_intact();
    throw;
  }
}

}  // namespace

Dump read_dump(const std::string& path) {
  Dump dump;
  {
    TextFeed feed(path, kRowKey);
    dump = parse_intact(feed, [&] { return parse(feed.text(), path, &feed); });
  }
  if (dump.checksums.needs_second_read) {
    TextFeed feed(path, kRowKey);
    dump.checksums = parse_intact(feed, [&] { return parse(feed.text(), path, &feed, true); }).checksums;
  }
  return dump;
}

}  // namespace graphprobe::compare
