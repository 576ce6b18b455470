#include "format/json_reader.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <algorithm>
#include <unordered_map>
#include <utility>

namespace graphprobe::json {

ParseError::ParseError(size_t line, size_t column, const std::string& what)
    : std::runtime_error(std::to_string(line) + ":" + std::to_string(column) + ": " + what),
      line_(line),
      column_(column),
      detail_(what) {}

const char* Value::kind_name(Kind k) {
  switch (k) {
    case Kind::kNull: return "null";
    case Kind::kBool: return "a boolean";
    case Kind::kNumber: return "a number";
    case Kind::kString: return "a string";
    case Kind::kArray: return "a list";
    case Kind::kObject: return "an object";
  }
  return "?";
}

namespace {
[[noreturn]] void wrong_kind(Value::Kind want, Value::Kind got) {
  throw std::logic_error(std::string("json::Value: expected ") + Value::kind_name(want) + ", got " +
                         Value::kind_name(got));
}

// Line breaks in [from, to). In blocks of 255 bytes with a byte-wide count
// per lane: std::count widened every byte's count to 64 bits, and the
// reader counts every byte of a dump.json (each entry's line is kept).
size_t count_newlines(const char* from, const char* to) {
  size_t lines = 0;
  while (to - from >= 255) {
    unsigned char block = 0;
    for (int i = 0; i < 255; ++i) block += static_cast<unsigned char>(from[i] == '\n');
    lines += block;
    from += 255;
  }
  for (; from < to; ++from) lines += *from == '\n';
  return lines;
}
}  // namespace

bool Value::as_bool() const {
  if (kind_ != Kind::kBool) wrong_kind(Kind::kBool, kind_);
  return boolean_;
}
double Value::as_number() const {
  if (kind_ != Kind::kNumber) wrong_kind(Kind::kNumber, kind_);
  return number_;
}
const std::string& Value::as_string() const {
  if (kind_ != Kind::kString) wrong_kind(Kind::kString, kind_);
  return string_;
}
const std::vector<Value>& Value::items() const {
  if (kind_ != Kind::kArray && kind_ != Kind::kObject) wrong_kind(Kind::kArray, kind_);
  return items_;
}
const std::vector<std::string>& Value::keys() const {
  if (kind_ != Kind::kObject) wrong_kind(Kind::kObject, kind_);
  return keys_;
}
const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::kObject) return nullptr;
  for (size_t i = keys_.size(); i-- > 0;)
    if (keys_[i] == key) return &items_[i];
  return nullptr;
}

// Recursive descent over a string_view; `pos_` is the next unread byte.
class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& options) : text_(text), options_(options) {}

  Value document() {
    Value v;
    skip_ws();
    value(v, 0);
    finish();
    return v;
  }

 private:
  friend class ObjectStream;
  friend Value parse_value(std::string_view, size_t, const ParseOptions&, size_t*);

  void finish() {
    skip_ws();
    if (pos_ != text_.size()) fail(pos_, "expected end of document after the top-level value");
  }

  // Line and column of byte `at`. Positions asked for only grow (errors,
  // duplicate keys), so the scan resumes where the last one stopped.
  std::pair<size_t, size_t> locate(size_t at) const {
    if (at < located_at_) located_at_ = 0, located_line_ = 1, located_col_ = 1;
    // Called for every entry of a dump.json (its line is kept for messages):
    // a counting loop the compiler vectorises, not a branch per byte.
    const size_t end = std::min(at, text_.size());
    if (end > located_at_) {
      const char* from = text_.data() + located_at_;
      const char* to = text_.data() + end;
      const size_t lines = count_newlines(from, to);
      if (lines == 0) {
        located_col_ += static_cast<size_t>(to - from);
      } else {
        located_line_ += lines;
        const char* last = static_cast<const char*>(memrchr(from, '\n', static_cast<size_t>(to - from)));
        located_col_ = 1 + static_cast<size_t>(to - last - 1);
      }
    }
    located_at_ = std::max(located_at_, end);
    return {located_line_, located_col_};
  }

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    const auto [line, col] = locate(at);
    throw ParseError(line, col, what);
  }

  std::string describe_here() const {
    if (pos_ >= text_.size()) return "end of input";
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    static const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[c >> 4] + hex[c & 0xf];
  }

  [[noreturn]] void expected(const std::string& what) const { fail(pos_, "expected " + what + ", found " + describe_here()); }

  void skip_ws() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') ++pos_;
      else break;
    }
  }

  bool consume_literal(std::string_view lit) {
    if (text_.substr(pos_, lit.size()) == lit) {
      pos_ += lit.size();
      return true;
    }
    return false;
  }

  void value(Value& out, size_t depth) {
    if (pos_ >= text_.size()) expected("a value");
    const char c = text_[pos_];
    switch (c) {
      case '{': object(out, depth + 1); return;
      case '[': array(out, depth + 1); return;
      case '"':
        out.kind_ = Value::Kind::kString;
        string(out.string_);
        return;
      case 't':
        if (!consume_literal("true")) expected("a value");
        out.kind_ = Value::Kind::kBool;
        out.boolean_ = true;
        return;
      case 'f':
        if (!consume_literal("false")) expected("a value");
        out.kind_ = Value::Kind::kBool;
        out.boolean_ = false;
        return;
      case 'n':
        if (!consume_literal("null")) expected("a value");
        out.kind_ = Value::Kind::kNull;
        return;
      case 'N':
        if (!consume_literal("NaN")) expected("a value");
        out.kind_ = Value::Kind::kNumber;
        out.number_ = std::numeric_limits<double>::quiet_NaN();
        return;
      case 'I':
        if (!consume_literal("Infinity")) expected("a value");
        out.kind_ = Value::Kind::kNumber;
        out.number_ = std::numeric_limits<double>::infinity();
        return;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          number(out);
          return;
        }
        expected("a value");
    }
  }

  void check_depth(size_t depth) const {
    if (depth > options_.max_depth)
      fail(pos_, "nesting deeper than " + std::to_string(options_.max_depth) +
                     " levels of lists and objects (graphprobe's dumper nests values at most " +
                     std::to_string(kMaxValueNesting) + " levels inside a call's arguments and output)");
  }

  // Index of `key` among the object's keys, or npos. Objects with many keys
  // (rare once "data" is streamed) get a hash index built on the way.
  static constexpr size_t kIndexFrom = 32;
  size_t find_key(const Value& obj, const std::string& key,
                  std::unordered_map<std::string, size_t>& index) const {
    if (obj.keys_.size() < kIndexFrom) {
      for (size_t i = 0; i < obj.keys_.size(); ++i)
        if (obj.keys_[i] == key) return i;
      return std::string::npos;
    }
    if (index.empty())
      for (size_t i = 0; i < obj.keys_.size(); ++i) index.emplace(obj.keys_[i], i);
    auto it = index.find(key);
    return it == index.end() ? std::string::npos : it->second;
  }

  void object(Value& out, size_t depth) {
    check_depth(depth);
    out.kind_ = Value::Kind::kObject;
    ++pos_;  // '{'
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return;
    }
    std::unordered_map<std::string, size_t> index;
    std::string key;
    while (true) {
      skip_ws();
      if (pos_ >= text_.size() || text_[pos_] != '"') expected("a string key");
      const size_t key_at = pos_;
      key.clear();
      string(key);
      skip_ws();
      if (pos_ >= text_.size() || text_[pos_] != ':') expected("':' after the key");
      ++pos_;
      skip_ws();
      const size_t seen = find_key(out, key, index);
      if (seen == std::string::npos) {
        if (!index.empty()) index.emplace(key, out.keys_.size());
        out.keys_.push_back(key);
        out.items_.emplace_back();
        value(out.items_.back(), depth);
      } else {
        if (options_.duplicates) {
          const auto [line, col] = locate(key_at);
          options_.duplicates->push_back({key, line, col});
        }
        Value later;
        value(later, depth);
        out.items_[seen] = std::move(later);
      }
      skip_ws();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return;
      }
      expected("',' or '}' in an object");
    }
  }

  void array(Value& out, size_t depth) {
    check_depth(depth);
    out.kind_ = Value::Kind::kArray;
    ++pos_;  // '['
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return;
    }
    while (true) {
      skip_ws();
      out.items_.emplace_back();
      value(out.items_.back(), depth);
      skip_ws();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return;
      }
      expected("',' or ']' in a list");
    }
  }

  void number(Value& out) {
    const size_t start = pos_;
    bool integer = true;
    if (text_[pos_] == '-') {
      ++pos_;
      if (consume_literal("Infinity")) {
        out.kind_ = Value::Kind::kNumber;
        out.number_ = -std::numeric_limits<double>::infinity();
        return;
      }
    }
    auto digits = [&]() {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
      if (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
        fail(pos_, "leading zeros are not allowed in a number");
    } else if (digits() == 0) {
      expected("a digit");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integer = false;
      ++pos_;
      if (digits() == 0) expected("a digit after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integer = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) expected("a digit in the exponent");
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    double v = 0;
    auto res = std::from_chars(first, last, v);
    if (res.ec == std::errc::result_out_of_range) {
      // Python reads 1e999 as inf and 1e-999 as 0.0; strtod does the same.
      std::string copy(first, last);
      v = std::strtod(copy.c_str(), nullptr);
    } else if (res.ec != std::errc() || res.ptr != last) {
      fail(start, "malformed number");
    }
    out.kind_ = Value::Kind::kNumber;
    out.number_ = v;
    out.integer_literal_ = integer;
  }

  static void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      s.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  uint32_t hex4() {
    if (text_.size() - pos_ < 4) fail(pos_, "expected 4 hex digits after \\u");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else expected("a hex digit in \\u escape");
      ++pos_;
    }
    return v;
  }

  // Length of the valid UTF-8 sequence at pos_, or 0. Names end up as Python
  // str, so bytes that are not UTF-8 must be rejected here.
  size_t utf8_length() const {
    const auto* p = reinterpret_cast<const unsigned char*>(text_.data()) + pos_;
    const size_t left = text_.size() - pos_;
    const unsigned char c = p[0];
    size_t n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0;
    if (left < n) return 0;
    for (size_t i = 1; i < n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    return n;
  }

  void string(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= text_.size()) fail(pos_, "unterminated string: expected '\"'");
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return;
      }
      if (c < 0x20) fail(pos_, "control character in a string: expected it escaped");
      if (c == '\\') {
        ++pos_;
        if (pos_ >= text_.size()) fail(pos_, "unterminated escape: expected a character after '\\'");
        const char e = text_[pos_++];
        switch (e) {
          case '"': out.push_back('"'); break;
          case '\\': out.push_back('\\'); break;
          case '/': out.push_back('/'); break;
          case 'b': out.push_back('\b'); break;
          case 'f': out.push_back('\f'); break;
          case 'n': out.push_back('\n'); break;
          case 'r': out.push_back('\r'); break;
          case 't': out.push_back('\t'); break;
          case 'u': {
            const size_t at = pos_ - 2;
            uint32_t cp = hex4();
            if (cp >= 0xd800 && cp <= 0xdbff) {
              if (!consume_literal("\\u")) fail(at, "unpaired surrogate in \\u escape: expected a low surrogate");
              const uint32_t lo = hex4();
              if (lo < 0xdc00 || lo > 0xdfff) fail(at, "unpaired surrogate in \\u escape: expected a low surrogate");
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
              fail(at, "unpaired low surrogate in \\u escape");
            }
            append_utf8(out, cp);
            break;
          }
          default:
            --pos_;
            expected("an escape character (\" \\ / b f n r t u)");
        }
        continue;
      }
      if (c < 0x80) {
        // The run of plain ASCII from here appended at once (a push_back
        // per character was most of reading an entry's name).
        size_t end = pos_ + 1;
        while (end < text_.size()) {
          const unsigned char d = static_cast<unsigned char>(text_[end]);
          if (d < 0x20 || d >= 0x80 || d == '"' || d == '\\') break;
          ++end;
        }
        out.append(text_.data() + pos_, end - pos_);
        pos_ = end;
        continue;
      }
      const size_t n = utf8_length();
      if (n == 0) fail(pos_, "invalid UTF-8 in a string");
      out.append(text_.substr(pos_, n));
      pos_ += n;
    }
  }

  std::string_view text_;
  ParseOptions options_;
  size_t pos_ = 0;
  mutable size_t located_at_ = 0, located_line_ = 1, located_col_ = 1;
};

namespace {
// A UTF-8 byte order mark is tolerated; Python's json rejects it, but
// editors on some systems add one and it carries no meaning.
std::string_view without_bom(std::string_view text) {
  if (text.substr(0, 3) == "\xef\xbb\xbf") text.remove_prefix(3);
  return text;
}
}  // namespace

Value parse(std::string_view text, const ParseOptions& options) {
  return Parser(without_bom(text), options).document();
}

Value parse_value(std::string_view text, size_t depth, const ParseOptions& options, size_t* consumed) {
  Parser p(text, options);
  Value v;
  p.skip_ws();
  p.value(v, depth);
  *consumed = p.pos_;
  return v;
}

ObjectStream::ObjectStream(std::string_view text, const ParseOptions& options)
    : parser_(std::make_unique<Parser>(without_bom(text), options)) {}

ObjectStream::~ObjectStream() = default;

bool ObjectStream::enter_object() {
  Parser& p = *parser_;
  p.skip_ws();
  if (p.pos_ >= p.text_.size() || p.text_[p.pos_] != '{') return false;
  p.check_depth(first_member_.size() + 1);
  ++p.pos_;
  first_member_.push_back(true);
  return true;
}

bool ObjectStream::next_key(std::string& key) {
  Parser& p = *parser_;
  p.skip_ws();
  const bool first = first_member_.back();
  if (p.pos_ < p.text_.size() && p.text_[p.pos_] == '}') {
    ++p.pos_;
    first_member_.pop_back();
    return false;
  }
  if (!first) {
    if (p.pos_ >= p.text_.size() || p.text_[p.pos_] != ',') p.expected("',' or '}' in an object");
    ++p.pos_;
    p.skip_ws();
  }
  if (p.pos_ >= p.text_.size() || p.text_[p.pos_] != '"') p.expected("a string key");
  key.clear();
  p.string(key);
  p.skip_ws();
  if (p.pos_ >= p.text_.size() || p.text_[p.pos_] != ':') p.expected("':' after the key");
  ++p.pos_;
  p.skip_ws();
  first_member_.back() = false;
  return true;
}

Value ObjectStream::value() {
  Value v;
  parser_->value(v, first_member_.size());
  return v;
}

void ObjectStream::finish() { parser_->finish(); }

std::pair<size_t, size_t> ObjectStream::position() const { return parser_->locate(parser_->pos_); }

size_t ObjectStream::offset() const { return parser_->pos_; }

std::string_view ObjectStream::text() const { return parser_->text_; }

void ObjectStream::skip_to(size_t offset) { parser_->pos_ = std::min(offset, parser_->text_.size()); }

ObjectStream::Mark ObjectStream::mark() const {
  const Parser& p = *parser_;
  Mark m{p.pos_, p.located_at_, p.located_line_, p.located_col_, first_member_.size(), 0, {}};
  if (m.depth <= 64) {
    for (size_t i = 0; i < m.depth; ++i) m.first_bits |= uint64_t{first_member_[i]} << i;
  } else {
    m.first_member = first_member_;
  }
  return m;
}

void ObjectStream::reset(const Mark& m) {
  Parser& p = *parser_;
  p.pos_ = m.pos;
  p.located_at_ = m.located_at;
  p.located_line_ = m.line;
  p.located_col_ = m.column;
  if (m.depth <= 64) {
    first_member_.resize(m.depth);
    for (size_t i = 0; i < m.depth; ++i) first_member_[i] = (m.first_bits >> i) & 1;
  } else {
    first_member_ = m.first_member;
  }
}

void ObjectStream::count_lines_to(size_t offset) { parser_->locate(offset); }

}  // namespace graphprobe::json
