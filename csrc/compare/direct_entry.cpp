#include "compare/direct_entry.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>

namespace graphprobe::compare {
namespace {

// Deeper values go to the tree reader, which enforces json::kMaxDepth.
constexpr size_t kMaxDirectDepth = 64;

// The keys of a tensor record this reader takes itself (bits of `seen`).
enum RecordKey : int { kKeyType, kKeyDtype, kKeyShape, kKeyMax, kKeyMin, kKeyMean, kKeyNorm, kKeyGrad, kKeyDataName,
                       kKeySketch, kKeyOther };

RecordKey record_key(std::string_view k) {
  switch (k.size()) {
    case 3: return k == "Max" ? kKeyMax : k == "Min" ? kKeyMin : kKeyOther;
    case 4: return k == "type" ? kKeyType : k == "Mean" ? kKeyMean : k == "Norm" ? kKeyNorm : kKeyOther;
    case 5: return k == "dtype" ? kKeyDtype : k == "shape" ? kKeyShape : kKeyOther;
    case 6: return k == "Sketch" ? kKeySketch : kKeyOther;
    case 9: return k == "data_name" ? kKeyDataName : kKeyOther;
    case 13: return k == "requires_grad" ? kKeyGrad : kKeyOther;
    default: return kKeyOther;
  }
}

// The bytes of a little-endian word that end a plain string: '"', '\\',
// controls (< 0x20) and non-ASCII (>= 0x80); the lowest set bit (0x80 of
// a byte) is the first such byte. A byte above a match may be flagged
// falsely (the subtraction's borrow), never one below it.
constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHighs = 0x8080808080808080ull;
inline uint64_t zero_bytes(uint64_t w) { return (w - kOnes) & ~w & kHighs; }
inline uint64_t stop_bytes(uint64_t w) {
  return zero_bytes(w ^ (kOnes * '"')) | zero_bytes(w ^ (kOnes * '\\')) | ((w - kOnes * 0x20) & ~w & kHighs) |
         (w & kHighs);
}

// m * 10^n + the n decimal digits at p (known to be digits; the result
// below 2^64): eight digits a step as one little-endian word (the SWAR
// conversion fast_float and simdjson use), the rest one by one.
inline uint64_t accumulate_digits(uint64_t m, const char* p, size_t n) {
  if constexpr (std::endian::native == std::endian::little) {
    for (; n >= 8; n -= 8, p += 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      w -= 0x3030303030303030ull;
      w = (w * 10) + (w >> 8);  // pairs of digits
      w = (((w & 0x000000FF000000FFull) * (100 + (1000000ull << 32))) +
           (((w >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32)))) >> 32;
      m = m * 100000000 + w;
    }
  }
  for (; n > 0; --n, ++p) m = m * 10 + static_cast<uint64_t>(*p - '0');
  return m;
}

void append_index(std::string& s, size_t i) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, i);
  s.push_back('.');
  s.append(buf, res.ptr);
}

}  // namespace

bool holds_checksum(const json::Value& v, bool& tensor) {
  if (v.is_array()) {
    for (const json::Value& x : v.items())
      if (holds_checksum(x, tensor)) return true;
    return false;
  }
  if (!v.is_object()) return false;
  if (v.find("dtype") && v.find("shape")) {
    tensor = true;
    return v.find("md5") != nullptr;
  }
  for (const json::Value& x : v.items())
    if (holds_checksum(x, tensor)) return true;
  return false;
}

size_t DirectEntryReader::read(std::string_view text, size_t offset, size_t depth, bool parameters_grad) {
  const size_t rows = dump_.rows.size();
  const size_t sketches = dump_.sketches.size();
  p_ = text.data() + std::min(offset, text.size());
  end_ = text.data() + text.size();
  entry_ = static_cast<uint32_t>(dump_.entries.size() - 1);
  saw_tensor_ = false;
  keys_.clear();
  bool ok = false;
  try {
    ok = parameters_grad ? parameters_grad_entry(depth) : entry(depth);
  } catch (const DumpFormatError&) {
    // The walk rejects a value: the tree reader says so, with its path.
  } catch (const json::ParseError&) {
    // Malformed (or not yet loaded) text: the tree reader reports its line.
  }
  if (ok) return static_cast<size_t>(p_ - text.data());
  dump_.rows.erase(dump_.rows.begin() + static_cast<std::ptrdiff_t>(rows), dump_.rows.end());
  dump_.sketches.resize(sketches);
  return npos;
}

bool DirectEntryReader::entry(size_t depth) {
  if (!consume('{') || depth + 1 > kMaxDirectDepth) return false;
  const std::string& entry_name = dump_.entries.back();
  const size_t first_row = dump_.rows.size();
  const size_t first_sketch = dump_.sketches.size();
  // Where each part's rows are, to put them in kEntryParts order when the
  // file has them in another (graphprobe writes "parameters" last).
  struct Segment {
    size_t part, begin, end;
  };
  std::array<Segment, std::size(kEntryParts)> segments{};
  size_t n_segments = 0;
  bool in_order = true;
  ws();
  if (consume('}')) return true;
  for (;;) {
    std::string_view key;
    ws();
    if (!string(key)) return false;
    ws();
    if (!consume(':')) return false;
    size_t part = 0;
    while (part < std::size(kEntryParts) && key != kEntryParts[part].key) ++part;
    if (part == std::size(kEntryParts)) return false;  // a key the rows ignore: the tree reader validates it
    for (size_t i = 0; i < n_segments; ++i)
      if (segments[i].part == part) return false;  // repeated: the last one counts, with a note
    if (n_segments > 0 && part < segments[n_segments - 1].part) in_order = false;
    role_ = kEntryParts[part].role;
    keep_positions_ = true;
    name_.assign(entry_name);
    name_ += kEntryParts[part].row;
    const size_t begin = dump_.rows.size();
    ws();
    if (!node(depth + 1)) return false;
    segments[n_segments++] = {part, begin, dump_.rows.size()};
    ws();
    if (consume(',')) continue;
    if (consume('}')) break;
    return false;
  }
  if (in_order) return true;
  std::stable_sort(segments.begin(), segments.begin() + static_cast<std::ptrdiff_t>(n_segments),
                   [](const Segment& a, const Segment& b) { return a.part < b.part; });
  std::vector<TensorRecord> sorted;
  sorted.reserve(dump_.rows.size() - first_row);
  for (size_t i = 0; i < n_segments; ++i)
    for (size_t r = segments[i].begin; r < segments[i].end; ++r) sorted.push_back(std::move(dump_.rows[r]));
  std::move(sorted.begin(), sorted.end(), dump_.rows.begin() + static_cast<std::ptrdiff_t>(first_row));
  // Sketches numbered in row order, as the tree reader appends them.
  if (dump_.sketches.size() > first_sketch) {
    std::vector<std::array<double, 4>> sketches;
    sketches.reserve(dump_.sketches.size() - first_sketch);
    for (size_t r = first_row; r < dump_.rows.size(); ++r) {
      TensorRecord& row = dump_.rows[r];
      if (row.sketch < 0) continue;
      sketches.push_back(dump_.sketches[static_cast<size_t>(row.sketch)]);
      row.sketch = static_cast<int32_t>(first_sketch + sketches.size() - 1);
    }
    std::copy(sketches.begin(), sketches.end(), dump_.sketches.begin() + static_cast<std::ptrdiff_t>(first_sketch));
  }
  return true;
}

bool DirectEntryReader::parameters_grad_entry(size_t depth) {
  // msprobe's read_op: one structure of records, named without list
  // positions; the entry's own keys are names, whatever they say.
  if (peek() != '{' || depth + 1 > kMaxDirectDepth) return false;
  role_ = Role::kInput;
  keep_positions_ = false;
  name_.assign(dump_.entries.back());
  ++p_;
  const size_t keys_begin = keys_.size();
  ws();
  if (consume('}')) return true;
  for (;;) {
    std::string_view key;
    ws();
    if (!string(key)) return false;
    ws();
    if (!consume(':')) return false;
    if (std::find(keys_.begin() + static_cast<std::ptrdiff_t>(keys_begin), keys_.end(), key) != keys_.end())
      return false;
    keys_.push_back(key);
    const size_t len = name_.size();
    name_ += '.';
    name_ += key;
    ws();
    if (!node(depth + 1)) return false;
    name_.resize(len);
    ws();
    if (consume(',')) continue;
    if (consume('}')) break;
    return false;
  }
  keys_.resize(keys_begin);
  return true;
}

bool DirectEntryReader::node(size_t depth) {
  switch (peek()) {
    case 'n': {
      if (!literal("null")) return false;
      // msprobe's default item: a null where a value was expected.
      TensorRecord& r = dump_.rows.emplace_back();
      r.name = dump_.arena->keep(name_);
      r.entry = entry_;
      r.role = role_;
      r.is_tensor = false;
      r.dtype = "N/A";
      r.shape_text = "N/A";
      return true;
    }
    case '[': return array(depth + 1);
    case '{': return object(depth + 1);
    default: return false;  // the tree reader's message: expected a record, a list, ...
  }
}

bool DirectEntryReader::array(size_t depth) {
  if (depth > kMaxDirectDepth) return false;
  ++p_;
  ws();
  if (consume(']')) return true;
  for (size_t i = 0;; ++i) {
    const size_t len = name_.size();
    if (keep_positions_) append_index(name_, i);
    ws();
    if (!node(depth)) return false;
    name_.resize(len);
    ws();
    if (consume(',')) continue;
    if (consume(']')) return true;
    return false;
  }
}

bool DirectEntryReader::object(size_t depth) {
  if (depth > kMaxDirectDepth) return false;
  const char* start = p_;
  ++p_;
  ws();
  if (consume('}')) return true;  // an empty dict: no rows
  std::string_view key;
  if (!string(key)) return false;
  if (key == "type") {
    // A record: its keys are known, or the tree reader walks it.
    p_ = start;
    if (record()) return true;
    p_ = start;
    return tree(depth - 1);
  }
  if (key == "class_type") {
    p_ = start;
    return tree(depth - 1);
  }
  // A dict without "type" first: a container (nested kwargs, dict outputs).
  const size_t keys_begin = keys_.size();
  bool dtype = false, shape = false;
  for (;;) {
    ws();
    if (!consume(':')) return false;
    // "type" later on makes it a record; "class_type" may make it a P2POp;
    // "dtype" with "shape" make it a tensor to the checksum collector.
    if (key == "type" || key == "class_type") return false;
    dtype = dtype || key == "dtype";
    shape = shape || key == "shape";
    if (dtype && shape) return false;
    if (std::find(keys_.begin() + static_cast<std::ptrdiff_t>(keys_begin), keys_.end(), key) != keys_.end())
      return false;
    keys_.push_back(key);
    const size_t len = name_.size();
    name_ += '.';
    name_ += key;
    ws();
    if (!node(depth)) return false;
    name_.resize(len);
    ws();
    if (consume('}')) break;
    if (!consume(',')) return false;
    ws();
    if (!string(key)) return false;
  }
  keys_.resize(keys_begin);
  return true;
}

// A tensor record of known keys: "type" (text), "dtype" (non-empty text),
// "shape" (sizes), the four statistics (numbers, booleans or null),
// "requires_grad", "data_name", "Sketch". False for anything else, the
// cursor anywhere: the caller hands the record to the tree reader.
bool DirectEntryReader::record() {
  ++p_;  // '{'
  unsigned seen = 0;
  std::string_view dtype, data_name;
  bool has_data_name = false;
  std::optional<bool> requires_grad;
  StatArray stats;
  std::array<ValueKind, kNumStats> kinds{};
  std::array<double, 4> sketch{};
  bool has_sketch = false;
  shape_.clear();
  for (;;) {
    std::string_view key;
    ws();
    if (!string(key)) return false;
    ws();
    if (!consume(':')) return false;
    const RecordKey k = record_key(key);
    if (k == kKeyOther || (seen & (1u << k))) return false;
    seen |= 1u << k;
    ws();
    switch (k) {
      case kKeyType: {
        std::string_view type;
        if (!string(type)) return false;
        break;
      }
      case kKeyDtype:
        if (!string(dtype) || dtype.empty()) return false;  // no dtype: a value, not a tensor
        break;
      case kKeyShape: {
        if (!consume('[')) return false;
        ws();
        if (consume(']')) break;
        for (;;) {
          int64_t d;
          ws();
          if (!size(d)) return false;
          shape_.push_back(d);
          ws();
          if (consume(',')) continue;
          if (consume(']')) break;
          return false;
        }
        break;
      }
      case kKeyMax:
      case kKeyMin:
      case kKeyMean:
      case kKeyNorm: {
        const int s = k - kKeyMax;
        const char c = peek();
        if (c == 'n') {
          if (!literal("null")) return false;
        } else if (c == 't' || c == 'f') {
          // bool tensors: Max = any, Min = all
          const bool b = c == 't';
          if (!literal(b ? "true" : "false")) return false;
          stats[s] = b ? 1.0 : 0.0;
          kinds[s] = ValueKind::kBool;
        } else {
          double v;
          bool integer;
          if (!number(v, integer)) return false;
          stats[s] = v;
          kinds[s] = integer ? ValueKind::kInt : ValueKind::kFloat;
        }
        break;
      }
      case kKeyGrad:
        if (peek() == 'n') {
          if (!literal("null")) return false;
        } else if (literal("true")) {
          requires_grad = true;
        } else if (literal("false")) {
          requires_grad = false;
        } else {
          return false;
        }
        break;
      case kKeyDataName:
        if (peek() == 'n') {
          if (!literal("null")) return false;
        } else {
          if (!string(data_name)) return false;
          has_data_name = true;
        }
        break;
      case kKeySketch:
        if (peek() == 'n') {
          if (!literal("null")) return false;
          break;
        }
        if (!consume('[')) return false;
        for (size_t i = 0; i < 4; ++i) {
          bool integer;
          ws();
          if (!number(sketch[i], integer)) return false;
          ws();
          if (!consume(i < 3 ? ',' : ']')) return false;
        }
        has_sketch = true;
        break;
      case kKeyOther: return false;
    }
    ws();
    if (consume(',')) continue;
    if (consume('}')) break;
    return false;
  }
  if (!(seen & (1u << kKeyDtype)) || !(seen & (1u << kKeyShape))) return false;
  saw_tensor_ = true;
  TensorRecord& r = dump_.rows.emplace_back();
  r.name = dump_.arena->keep(name_);
  r.entry = entry_;
  r.role = role_;
  r.requires_grad = requires_grad;
  r.kinds = kinds;
  r.dtype.assign(dtype);
  r.shape = dump_.arena->keep(shape_);
  r.stats = stats;
  if (has_data_name) r.data_name = std::string(data_name);
  if (has_sketch) {
    r.sketch = static_cast<int32_t>(dump_.sketches.size());
    dump_.sketches.push_back(sketch);
  }
  return true;
}

// The value at the cursor, parsed as a tree and walked as the tree reader
// walks it. depth: the nesting of the value's parent.
bool DirectEntryReader::tree(size_t depth) {
  dups_.clear();
  json::ParseOptions options;
  options.duplicates = &dups_;
  size_t consumed = 0;
  const json::Value v =
      json::parse_value(std::string_view(p_, static_cast<size_t>(end_ - p_)), depth, options, &consumed);
  // A repeated key is noted with its line: the tree reader reads the entry.
  if (!dups_.empty() || holds_checksum(v, saw_tensor_)) return false;
  rest_.subtree(v, name_, entry_, role_, keep_positions_);
  p_ += consumed;
  return true;
}

void DirectEntryReader::ws() {
  // One compare and a bit test a byte: most bytes that end a run of
  // whitespace are above ' ' (a graphprobe dump indents every line).
  constexpr uint64_t kWs = (uint64_t{1} << ' ') | (uint64_t{1} << '\n') | (uint64_t{1} << '\t') | (uint64_t{1} << '\r');
  while (p_ < end_) {
    const auto c = static_cast<unsigned char>(*p_);
    if (c > ' ' || !((kWs >> c) & 1)) return;
    ++p_;
  }
}

bool DirectEntryReader::consume(char c) {
  if (peek() != c) return false;
  ++p_;
  return true;
}

bool DirectEntryReader::literal(std::string_view lit) {
  if (static_cast<size_t>(end_ - p_) < lit.size() || std::string_view(p_, lit.size()) != lit) return false;
  p_ += lit.size();
  return true;
}

// Text without escapes, all printable ASCII: what dump keys, dtypes and
// file names are. Anything else is the tree reader's (it decodes escapes
// and checks UTF-8).
bool DirectEntryReader::string(std::string_view& out) {
  if (!consume('"')) return false;
  const char* s = p_;
  // Eight bytes a step while there are eight (a record's strings are
  // mostly longer than its keys: dtypes, entry names); the byte loop below
  // then looks at the byte that stopped it, and at the last few.
  if constexpr (std::endian::native == std::endian::little) {
    while (end_ - p_ >= 8) {
      uint64_t w;
      std::memcpy(&w, p_, 8);
      const uint64_t stop = stop_bytes(w);
      if (stop != 0) {
        p_ += std::countr_zero(stop) / 8;
        break;
      }
      p_ += 8;
    }
  }
  while (p_ < end_) {
    const auto c = static_cast<unsigned char>(*p_);
    if (c == '"') {
      out = std::string_view(s, static_cast<size_t>(p_ - s));
      ++p_;
      return true;
    }
    if (c == '\\' || c < 0x20 || c >= 0x80) return false;
    ++p_;
  }
  return false;
}

// A JSON number, or NaN / Infinity / -Infinity as Python writes them; the
// same grammar and value as json_reader's, integer: written without
// fraction or exponent. A number out of double's range is the tree
// reader's (it reads 1e999 as inf, as Python does).
bool DirectEntryReader::number(double& v, bool& integer) {
  integer = false;
  const char* start = p_;
  const bool negative = consume('-');
  if (p_ < end_ && (*p_ == 'N' || *p_ == 'I')) {
    p_ = start;
    if (literal("NaN")) {
      v = std::numeric_limits<double>::quiet_NaN();
      return true;
    }
    if (literal("Infinity")) {
      v = std::numeric_limits<double>::infinity();
      return true;
    }
    if (consume('-') && literal("Infinity")) {
      v = -std::numeric_limits<double>::infinity();
      return true;
    }
    return false;
  }
  auto digit = [&] { return p_ < end_ && *p_ >= '0' && *p_ <= '9'; };
  integer = true;
  const char* int_begin = p_;
  if (consume('0')) {
    if (digit()) return false;
  } else {
    if (!digit()) return false;
    while (digit()) ++p_;
  }
  const char* int_end = p_;
  const char* frac_begin = p_;
  if (consume('.')) {
    integer = false;
    frac_begin = p_;
    if (!digit()) return false;
    while (digit()) ++p_;
  }
  const char* frac_end = p_;
  int64_t exponent = 0;
  if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
    integer = false;
    ++p_;
    const bool minus = p_ < end_ && *p_ == '-';
    if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
    if (!digit()) return false;
    while (digit()) {
      if (exponent < 100000) exponent = exponent * 10 + (*p_ - '0');
      ++p_;
    }
    if (minus) exponent = -exponent;
  }
  // The digits as one integer when there are at most 19 (10^19 < 2^64),
  // eight at a time, for the exact case below; from_chars reads the text
  // again otherwise.
  const size_t n_int = static_cast<size_t>(int_end - int_begin);
  const size_t n_frac = static_cast<size_t>(frac_end - frac_begin);
  uint64_t mantissa = 0;
  const bool fits = n_int + n_frac <= 19;
  if (fits) {
    mantissa = accumulate_digits(accumulate_digits(0, int_begin, n_int), frac_begin, n_frac);
    exponent -= static_cast<int64_t>(n_frac);
  }
  // Clinger's fast path: a mantissa below 2^53 and a power of ten up to
  // 10^22 are both exact doubles, so one multiplication or division rounds
  // once, to the double from_chars gives (correctly rounded, round to
  // nearest). Half of Python's repr of statistics has <= 15-16 digits.
  static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (fits && mantissa <= (uint64_t{1} << 53) && exponent >= -22 && exponent <= 22) {
    const double m = static_cast<double>(mantissa);
    const double x = exponent < 0 ? m / kPow10[-exponent] : m * kPow10[exponent];
    v = negative ? -x : x;
    return true;
  }
  const auto res = std::from_chars(start, p_, v);
  return res.ec == std::errc() && res.ptr == p_;
}

// A size: a non-negative integer literal of up to 15 digits (exact in both
// int64 and the tree reader's double; longer ones are the tree reader's).
bool DirectEntryReader::size(int64_t& v) {
  const char* start = p_;
  if (consume('0')) {
    v = 0;
    return !(p_ < end_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '.' || *p_ == 'e' || *p_ == 'E'));
  }
  int64_t x = 0;
  while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
    if (p_ - start == 15) return false;
    x = x * 10 + (*p_++ - '0');
  }
  if (p_ == start) return false;
  if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
  v = x;
  return true;
}

}  // namespace graphprobe::compare
