#include "compare/checksums.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "compare/msprobe_values.h"
#include "fs/atomic_file.h"
#include "record/dump_keys.h"

namespace graphprobe::compare {
namespace {

namespace keys = graphprobe::dump_keys;

// The key order of an entry's parts (msprobe's compare lists a changed weight
// before the output it changes); anything else after them, in file order.
int part_rank(std::string_view part) {
  if (part == keys::kInputArgs) return 0;
  if (part == keys::kInputKwargs || part == "input") return 1;
  if (part == keys::kParameters) return 2;
  if (part == keys::kOutput) return 3;
  return 4;
}

// Both keys present, whatever their values: the test the checksum compare
// has always used for a tensor record.
bool is_tensor(const json::Value& v) {
  if (!v.is_object()) return false;
  bool dtype = false, shape = false;
  for (const std::string& k : v.keys()) {
    dtype = dtype || k == keys::kDtype;
    shape = shape || k == keys::kShape;
  }
  return dtype && shape;
}

// Characters of UTF-8 text, as Python's len() counts them.
size_t characters(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool lower_hex(const std::string& s, uint64_t* bits) {
  if (s.size() > 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *bits = v;
  return true;
}

}  // namespace

void ChecksumCollector::clear() { *this = ChecksumCollector(collect_all_); }

void ChecksumCollector::entry(uint32_t raw_index, const std::string& name, const json::Value& v) {
  if (!v.is_object() || late_) return;
  raw_entry_ = raw_index;
  std::string path;
  if (!collecting_) {
    // Only look: does this entry hold a record with "md5"?
    const size_t before = tensors_seen_;
    found_ = false;
    for (const json::Value& part : v.items()) walk(part, path);
    if (!found_) return;
    // Records seen in earlier entries had no "md5" and are gone.
    if (before > 0) {
      late_ = true;
      return;
    }
    collecting_ = true;
  }
  const auto& keys = v.keys();
  const auto& items = v.items();
  // Parts in rank order, file order within a rank (a stable sort of few keys).
  std::array<std::vector<uint32_t>, 5> order;
  for (uint32_t i = 0; i < keys.size(); ++i) order[static_cast<size_t>(part_rank(keys[i]))].push_back(i);
  for (const auto& rank : order)
    for (uint32_t i : rank) {
      const std::string& part = keys[i];
      path.assign(name);
      path += '.';
      path += (part == keys::kInputArgs || part == keys::kInputKwargs) ? std::string_view("input") : part;
      walk(items[i], path);
    }
}

void ChecksumCollector::walk(const json::Value& v, std::string& name) {
  if (v.is_array()) {
    const auto& items = v.items();
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_array() && !items[i].is_object()) continue;
      const size_t len = name.size();
      if (collecting_) {
        name += '.';
        name += std::to_string(i);
      }
      walk(items[i], name);
      name.resize(len);
    }
    return;
  }
  if (!v.is_object()) return;
  if (is_tensor(v)) {
    tensor(v, name);
    return;
  }
  const auto& keys = v.keys();
  const auto& items = v.items();
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_array() && !items[i].is_object()) continue;
    const size_t len = name.size();
    if (collecting_) {
      name += '.';
      name += keys[i];
    }
    walk(items[i], name);
    name.resize(len);
  }
}

void ChecksumCollector::tensor(const json::Value& v, const std::string& name) {
  const json::Value* md5 = v.find(keys::kMd5);
  if (!collecting_) {
    ++tensors_seen_;
    found_ = found_ || md5 != nullptr;
    return;
  }
  out_.carried = out_.carried || md5 != nullptr;
  ChecksumRecord r;
  r.name = name;
  r.entry = raw_entry_;
  if (md5 && md5->is_string()) {
    const std::string& text = md5->as_string();
    const size_t n = characters(text);
    if (std::find(out_.digits.begin(), out_.digits.end(), n) == out_.digits.end()) {
      out_.digits.push_back(n);
      std::sort(out_.digits.begin(), out_.digits.end());
    }
    if (lower_hex(text, &r.md5_bits)) {
      r.md5 = ChecksumRecord::Md5::kHex;
      r.md5_len = static_cast<uint8_t>(text.size());
    } else {
      r.md5 = ChecksumRecord::Md5::kText;
      r.md5_text = text;
    }
  }
  if (const json::Value* dtype = v.find(keys::kDtype); dtype->is_string()) {
    const std::string& d = dtype->as_string();
    auto it = std::find(out_.dtypes.begin(), out_.dtypes.end(), d);
    r.dtype = static_cast<uint32_t>(it - out_.dtypes.begin());
    if (it == out_.dtypes.end()) out_.dtypes.push_back(d);
  } else {
    r.dtype = ChecksumRecord::kNoDtype;
  }
  if (const json::Value* shape = v.find(keys::kShape); shape->is_array()) {
    r.shape_kind = ChecksumRecord::Shape::kInts;
    for (const json::Value& d : shape->items()) {
      if (!d.is_integer_literal() || !(std::fabs(d.as_number()) < 9.2e18)) {
        r.shape_kind = ChecksumRecord::Shape::kOther;
        break;
      }
      r.shape.push_back(static_cast<int64_t>(d.as_number()));
    }
    if (r.shape_kind == ChecksumRecord::Shape::kOther) {
      r.shape.clear();
      r.shape_text = python_repr(*shape);
    }
  }
  out_.records.push_back(std::move(r));
}

ChecksumRecords ChecksumCollector::finish(const std::vector<std::string>& raw_entries) {
  ChecksumRecords out = std::move(out_);
  if (!out.carried) {
    // Nothing to compare: hold nothing.
    ChecksumRecords none;
    none.needs_second_read = late_;
    return none;
  }
  // Entry names as json.load keeps them: one per name, at its first place,
  // holding the records of its last occurrence.
  std::unordered_map<std::string_view, uint32_t> first;  // name -> its index in out.entries
  std::vector<uint32_t> place(raw_entries.size());        // raw index -> index in out.entries
  std::vector<uint32_t> last_of_place;
  first.reserve(raw_entries.size());
  for (uint32_t i = 0; i < raw_entries.size(); ++i) {
    auto [it, fresh] = first.emplace(raw_entries[i], static_cast<uint32_t>(out.entries.size()));
    if (fresh) {
      out.entries.push_back(raw_entries[i]);
      last_of_place.push_back(i);
    } else {
      last_of_place[it->second] = i;
    }
    place[i] = it->second;
  }
  bool repeated = out.entries.size() != raw_entries.size();
  std::vector<ChecksumRecord> kept;
  if (repeated) kept.reserve(out.records.size());
  for (ChecksumRecord& r : out.records) {
    const uint32_t p = place[r.entry];
    if (repeated && last_of_place[p] != r.entry) continue;
    r.entry = p;
    if (repeated) kept.push_back(std::move(r));
  }
  if (repeated) {
    std::stable_sort(kept.begin(), kept.end(),
                     [](const ChecksumRecord& a, const ChecksumRecord& b) { return a.entry < b.entry; });
    out.records = std::move(kept);
  }
  return out;
}

const char* checksum_result_name(ChecksumResult r) {
  switch (r) {
    case ChecksumResult::kIdentical: return "bit-identical";
    case ChecksumResult::kDifferent: return "bit-different";
    case ChecksumResult::kNoChecksum: return "no checksum";
    case ChecksumResult::kUnpaired: return "unpaired";
  }
  return "?";
}

std::string md5_text(const ChecksumRecord& r) {
  switch (r.md5) {
    case ChecksumRecord::Md5::kNone: return {};
    case ChecksumRecord::Md5::kText: return r.md5_text.str();
    case ChecksumRecord::Md5::kHex: {
      static const char* hex = "0123456789abcdef";
      std::string s(r.md5_len, '0');
      uint64_t v = r.md5_bits;
      for (size_t i = r.md5_len; i-- > 0; v >>= 4) s[i] = hex[v & 15];
      return s;
    }
  }
  return {};
}

std::string shape_repr(const ChecksumRecord& r) {
  if (r.shape_kind == ChecksumRecord::Shape::kOther) return r.shape_text.str();
  if (r.shape_kind == ChecksumRecord::Shape::kNone) return {};
  std::string s = "[";
  for (size_t i = 0; i < r.shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(r.shape[i]);
  }
  return s + "]";
}

namespace {

bool same_md5(const ChecksumRecord& a, const ChecksumRecord& b) {
  if (a.md5 != b.md5) return false;
  if (a.md5 == ChecksumRecord::Md5::kHex) return a.md5_len == b.md5_len && a.md5_bits == b.md5_bits;
  return a.md5_text.str() == b.md5_text.str();
}

bool same_shape(const ChecksumRecord& a, const ChecksumRecord& b) {
  if (a.shape_kind != b.shape_kind) return false;
  if (a.shape_kind == ChecksumRecord::Shape::kInts) return a.shape == b.shape;
  return a.shape_text.str() == b.shape_text.str();
}

const std::string* dtype_of(const ChecksumRecords& side, const ChecksumRecord& r) {
  return r.dtype == ChecksumRecord::kNoDtype ? nullptr : &side.dtypes[r.dtype];
}

}  // namespace

ChecksumComparison compare_checksums(const ChecksumRecords& target, const ChecksumRecords& bench) {
  ChecksumComparison c;
  std::unordered_map<std::string_view, int64_t> bench_first;
  bench_first.reserve(bench.records.size());
  for (size_t i = 0; i < bench.records.size(); ++i) bench_first.emplace(bench.records[i].name, static_cast<int64_t>(i));
  std::unordered_map<std::string_view, bool> seen;
  seen.reserve(target.records.size());
  c.rows.reserve(std::max(target.records.size(), bench.records.size()));
  for (size_t i = 0; i < target.records.size(); ++i) {
    const ChecksumRecord& t = target.records[i];
    if (!seen.emplace(t.name, true).second) continue;
    ChecksumRow row;
    row.target = static_cast<int64_t>(i);
    auto it = bench_first.find(t.name);
    if (it == bench_first.end()) {
      row.result = ChecksumResult::kUnpaired;
    } else {
      row.bench = it->second;
      const ChecksumRecord& b = bench.records[static_cast<size_t>(it->second)];
      if (t.md5 == ChecksumRecord::Md5::kNone || b.md5 == ChecksumRecord::Md5::kNone) {
        row.result = ChecksumResult::kNoChecksum;
      } else {
        const std::string *td = dtype_of(target, t), *bd = dtype_of(bench, b);
        const bool same_dtype = td == nullptr || bd == nullptr ? td == bd : *td == *bd;
        row.result = same_md5(t, b) && same_dtype && same_shape(t, b) ? ChecksumResult::kIdentical
                                                                       : ChecksumResult::kDifferent;
      }
    }
    if (row.result == ChecksumResult::kDifferent && !c.first_different) c.first_different = c.rows.size();
    c.rows.push_back(row);
  }
  // The bench's records without a partner: each name once, at its first place.
  for (size_t i = 0; i < bench.records.size(); ++i) {
    const std::string& name = bench.records[i].name;
    auto it = bench_first.find(name);
    if (it->second != static_cast<int64_t>(i) || seen.count(name)) continue;
    ChecksumRow row;
    row.bench = static_cast<int64_t>(i);
    c.rows.push_back(row);
  }
  for (const ChecksumRow& r : c.rows) ++c.counts[static_cast<size_t>(r.result)];
  return c;
}

namespace {

// Python's csv module (excel dialect, QUOTE_MINIMAL): a field holding the
// delimiter, the quote or a line break is quoted, quotes doubled.
void csv_field_py(std::string_view s, std::string& out) {
  // A plain loop: find_first_of calls memchr once per character.
  bool quote = false;
  for (char c : s) quote = quote || c == ',' || c == '"' || c == '\r' || c == '\n';
  if (!quote) {
    out += s;
    return;
  }
  out += '"';
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

void render_rows(const ChecksumRecords& target, const ChecksumRecords& bench, const ChecksumComparison& c,
                 size_t begin, size_t end, std::string& out) {
  for (size_t i = begin; i < end; ++i) {
    const ChecksumRow& row = c.rows[i];
    const ChecksumRecord* t = row.target >= 0 ? &target.records[static_cast<size_t>(row.target)] : nullptr;
    const ChecksumRecord* b = row.bench >= 0 ? &bench.records[static_cast<size_t>(row.bench)] : nullptr;
    csv_field_py((t ? t : b)->name, out);
    out += ',';
    csv_field_py(t ? md5_text(*t) : std::string(), out);
    out += ',';
    csv_field_py(b ? md5_text(*b) : std::string(), out);
    out += ',';
    const std::string* td = t ? dtype_of(target, *t) : nullptr;
    const std::string* bd = b ? dtype_of(bench, *b) : nullptr;
    csv_field_py(td ? std::string_view(*td) : std::string_view(), out);
    out += ',';
    csv_field_py(bd ? std::string_view(*bd) : std::string_view(), out);
    out += ',';
    csv_field_py(t ? shape_repr(*t) : std::string(), out);
    out += ',';
    csv_field_py(b ? shape_repr(*b) : std::string(), out);
    out += ',';
    out += checksum_result_name(row.result);
    out += "\r\n";
  }
}

constexpr const char* kHeader =
    "Name,NPU md5,Bench md5,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,Result\r\n";
constexpr size_t kRowsPerChunk = 8192;

}  // namespace

std::string render_checksum_csv(const ChecksumRecords& target, const ChecksumRecords& bench,
                                const ChecksumComparison& c) {
  std::string out = kHeader;
  render_rows(target, bench, c, 0, c.rows.size(), out);
  return out;
}

void write_checksum_csv(const ChecksumRecords& target, const ChecksumRecords& bench, const ChecksumComparison& c,
                        const std::string& path) {
  fs::AtomicFile file(path);
  std::string chunk = kHeader;
  for (size_t begin = 0; begin < c.rows.size(); begin += kRowsPerChunk) {
    render_rows(target, bench, c, begin, std::min(begin + kRowsPerChunk, c.rows.size()), chunk);
    file.append(chunk);
    chunk.clear();
  }
  if (!chunk.empty()) file.append(chunk);
  file.commit();
}

}  // namespace graphprobe::compare
