#include "compare/cell_text.h"

#include <charconv>
#include <cmath>

namespace graphprobe::compare {

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

std::string shape_of(const TensorRecord& r) { return r.shape_text.empty() ? shape_str(r.shape) : r.shape_text; }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace graphprobe::compare
