#pragma once
// A small streaming JSON writer. Torch-free.
//
// Numbers are written in the shortest form that reads back to the same
// double; non-finite values are written as NaN, Infinity and -Infinity (what
// Python's json module reads and writes), never as null, because a NaN in a
// statistic is exactly what a precision investigation is looking for.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace graphprobe::json {

std::string quote(std::string_view s);
std::string number(double v);
std::string integer(int64_t v);

class Writer {
 public:
  explicit Writer(int indent = 1) : indent_(indent) {}

  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(std::string_view k);
  void value_string(std::string_view s);
  void value_number(double v);
  void value_integer(int64_t v);
  void value_bool(bool b);
  void value_null();
  // Inserts text that is already valid JSON.
  void value_raw(std::string_view raw);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void before_value();
  void newline();

  struct Level {
    bool is_object;
    bool empty;
  };
  std::string out_;
  std::vector<Level> stack_;
  bool after_key_ = false;
  int indent_;
};

}  // namespace graphprobe::json
