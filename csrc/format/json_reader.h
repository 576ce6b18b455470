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
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
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

  // Object member by key; nullptr when absent or when this is not an
  // object. Keys are unique: see ParseOptions::duplicates.
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

// A key that appeared more than once in one object, where it appeared again.
struct DuplicateKey {
  std::string key;
  size_t line = 0;
  size_t column = 0;
};

// Deepest nesting of arrays and objects accepted by default. graphprobe's
// dumper records values nested at most kMaxValueNesting levels inside a
// call's input_args / input_kwargs / output, which sit 4 levels deep in a
// dump.json (document, data, entry, part): the reader has room to spare.
constexpr size_t kMaxDepth = 256;
constexpr size_t kMaxValueNesting = 32;  // graphprobe.wiring.probe.MAX_DEPTH

struct ParseOptions {
  // Deepest nesting of arrays and objects accepted.
  size_t max_depth = kMaxDepth;
  // Duplicate keys in an object: the last value is kept, at the position of
  // the first (what Python's json.load gives, and so msprobe); each repeat
  // is appended here when set.
  std::vector<DuplicateKey>* duplicates = nullptr;
};

// Parses one JSON document (surrounding whitespace allowed, nothing else).
Value parse(std::string_view text, const ParseOptions& options = {});

// Parses the one value at the start of `text` (whitespace before it
// allowed, anything after it left alone), as if nested `depth` levels deep;
// *consumed: the bytes read, up to the end of the value. For readers that
// take the common shapes straight from the text and want a tree only for
// the rest. Lines and columns in errors count from the start of `text`.
Value parse_value(std::string_view text, size_t depth, const ParseOptions& options, size_t* consumed);

class Parser;

// Reads one object member by member, each member's value parsed on its own:
// for a document whose bulk is one large object of small members (dump.json's
// "data"), memory holds one member's tree at a time, not the document's.
// Duplicate keys of the streamed objects are the caller's to handle.
class ObjectStream {
 public:
  ObjectStream(std::string_view text, const ParseOptions& options = {});
  ~ObjectStream();
  ObjectStream(const ObjectStream&) = delete;
  ObjectStream& operator=(const ObjectStream&) = delete;

  // Enters the object that starts at the cursor; false (nothing consumed)
  // when the value there is not an object.
  bool enter_object();
  // Reads the next member's key of the innermost entered object; false when
  // it ends (the closing '}' is consumed, the object is left).
  bool next_key(std::string& key);
  // Parses the current member's whole value.
  Value value();
  // After the outermost object: only whitespace may follow.
  void finish();
  // Line and column (1-based) of the cursor, for messages.
  std::pair<size_t, size_t> position() const;
  // Byte offset of the cursor.
  size_t offset() const;
  // The text the offsets count in (without a byte order mark).
  std::string_view text() const;
  // Nesting of the value at the cursor (the entered objects).
  size_t depth() const { return first_member_.size(); }
  // Moves the cursor to the end of the current member's value, read by the
  // caller from text() instead of by value().
  void skip_to(size_t offset);

  // For text that arrives in pieces (see compare's read_dump): an operation
  // that failed because it ran into bytes not yet there is retried, from a
  // Mark, once more text is there. Text before the cursor may be dropped
  // once its lines are counted (count_lines_to).
  struct Mark {
    size_t pos = 0;
    size_t located_at = 0, line = 1, column = 1;
    // The entered objects' "no key read yet" flags: as bits while there are
    // at most 64 (a mark is taken twice per entry of a dump.json, and a
    // vector's copy was an allocation each time), else in the vector.
    size_t depth = 0;
    uint64_t first_bits = 0;
    std::vector<bool> first_member;
  };
  Mark mark() const;
  void reset(const Mark& m);
  void count_lines_to(size_t offset);

 private:
  std::unique_ptr<Parser> parser_;
  std::vector<bool> first_member_;  // per entered object: no key read yet
};

}  // namespace graphprobe::json
