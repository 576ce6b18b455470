#pragma once
// A strict JSON reader for dump.json files. Torch-free.
//
// Accepts RFC 8259 JSON plus the three non-finite literals that Python's json
// module writes (NaN, Infinity, -Infinity), because a NaN statistic is the
// signal a precision investigation looks for. Everything else that is not
// JSON is rejected with the line, the column and what was expected there.
// Nesting is limited so that hostile input cannot exhaust the stack.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace graphprobe::json {

// Malformed text. line() and column() are 1-based; column counts bytes.
class ParseError : public std::runtime_error {
 public:
  ParseError(size_t line, size_t column, const std::string& what);
  size_t line() const { return line_; }
  size_t column() const { return column_; }
  // The message without the "line:column: " prefix.
  const std::string& detail() const { return detail_; }

 private:
  size_t line_;
  size_t column_;
  std::string detail_;
};

class Value {
 public:
  enum class Kind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

  Value() = default;

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Accessors for the matching kind; they throw std::logic_error otherwise.
  bool as_bool() const;
  double as_number() const;
  const std::string& as_string() const;
  // Elements of an array, or values of an object (in document order).
  const std::vector<Value>& items() const;
  // Keys of an object, parallel to items().
  const std::vector<std::string>& keys() const;

  // Object member by key; the last one wins for duplicate keys (as in
  // Python's json). nullptr when absent or when this is not an object.
  const Value* find(std::string_view key) const;

  // Whether a number was written without fraction or exponent.
  bool is_integer_literal() const { return kind_ == Kind::kNumber && integer_literal_; }

  static const char* kind_name(Kind k);

 private:
  friend class Parser;
  Kind kind_ = Kind::kNull;
  bool boolean_ = false;
  bool integer_literal_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<std::string> keys_;
};

struct ParseOptions {
  // Deepest nesting of arrays and objects accepted.
  size_t max_depth = 256;
};

// Parses one JSON document (surrounding whitespace allowed, nothing else).
Value parse(std::string_view text, const ParseOptions& options = {});

}  // namespace graphprobe::json
