#include "compare/cell_text.h"

#include <charconv>
#include <cmath>

#include "compare/shortest_double.h"

namespace graphprobe::compare {

std::string format_number(double v) {
  std::string out;
  append_number(out, v);
  return out;
}

void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "nan";
  } else if (std::isinf(v)) {
    out += v > 0 ? "inf" : "-inf";
  } else {
    // Written in place: through a buffer, the copy (a memmove call per
    // number) was a quarter of the time spent on numbers in the CSV.
    // write_shortest, not std::to_chars: the same text (checked), ~1.6x
    // faster a number, the CSV step 1.2x (shortest_double.h).
    const size_t at = out.size();
    out.resize(at + kShortestDoubleRoom);
    char* end = write_shortest(out.data() + at, v);
    out.resize(static_cast<size_t>(end - out.data()));
  }
}

std::string shape_of(const TensorRecord& r) { return r.shape_text.empty() ? shape_str(r.shape) : r.shape_text; }

bool same_shape(const TensorRecord& a, const TensorRecord& b) {
  if (a.shape_text.empty() && b.shape_text.empty()) return a.shape == b.shape;
  return shape_of(a) == shape_of(b);
}

bool shape_is_scalar(const TensorRecord& r) { return r.shape_text.empty() ? r.shape.empty() : r.shape_text == "[]"; }

std::string shape_str(const Shape& s) {
  std::string out;
  append_shape(out, s);
  return out;
}

void append_shape(std::string& out, const Shape& s) {
  out.push_back('[');
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    char buf[24];
    const auto res = std::to_chars(buf, buf + sizeof(buf), s[i]);
    out.append(buf, res.ptr);
  }
  out.push_back(']');
}

}  // namespace graphprobe::compare
