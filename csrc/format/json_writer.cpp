#include "format/json_writer.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace graphprobe::json {

std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 0xf]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  // Keep floats recognisable as floats to readers that care (1 -> 1.0).
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string integer(int64_t v) { return std::to_string(v); }

void Writer::newline() {
  if (indent_ <= 0) return;
  out_.push_back('\n');
  out_.append(stack_.size() * static_cast<size_t>(indent_), ' ');
}

void Writer::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!stack_.empty()) {
    if (stack_.back().is_object) throw std::logic_error("json::Writer: value inside an object needs a key");
    if (!stack_.back().empty) out_.push_back(',');
    stack_.back().empty = false;
    newline();
  }
}

void Writer::begin_object() {
  before_value();
  out_.push_back('{');
  stack_.push_back({true, true});
}

void Writer::begin_array() {
  before_value();
  out_.push_back('[');
  stack_.push_back({false, true});
}

void Writer::end_object() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) newline();
  out_.push_back('}');
}

void Writer::end_array() {
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) newline();
  out_.push_back(']');
}

void Writer::key(std::string_view k) {
  if (stack_.empty() || !stack_.back().is_object) throw std::logic_error("json::Writer: key outside an object");
  if (!stack_.back().empty) out_.push_back(',');
  stack_.back().empty = false;
  newline();
  out_ += quote(k);
  out_ += indent_ > 0 ? ": " : ":";
  after_key_ = true;
}

void Writer::value_string(std::string_view s) {
  before_value();
  out_ += quote(s);
}
void Writer::value_number(double v) {
  before_value();
  out_ += number(v);
}
void Writer::value_integer(int64_t v) {
  before_value();
  out_ += integer(v);
}
void Writer::value_bool(bool b) {
  before_value();
  out_ += b ? "true" : "false";
}
void Writer::value_null() {
  before_value();
  out_ += "null";
}
void Writer::value_raw(std::string_view raw) {
  before_value();
  out_ += raw;
}

}  // namespace graphprobe::json
