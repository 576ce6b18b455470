#include "compare/msprobe_values.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "compare/cell_text.h"

namespace graphprobe::compare {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view strip(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string int_str(double v) {
  // JSON integers are held as doubles; within int64 they print exactly.
  if (std::fabs(v) < 9.2e18) return std::to_string(static_cast<long long>(v));
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, 0);
  return std::string(buf, res.ptr);
}

std::string quote_python(const std::string& s) {
  // repr(str): single quotes unless the text holds one and no double quote.
  const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == q) out.push_back('\\');
        out.push_back(c);
    }
  }
  out.push_back(q);
  return out;
}

bool is_number_kind(ValueKind k) { return k == ValueKind::kInt || k == ValueKind::kFloat || k == ValueKind::kBool; }

// pandas.to_numeric on a string: a plain decimal or exponent number.
bool parse_number(std::string_view s, double* out) {
  s = strip(s);
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  auto res = std::from_chars(s.data(), s.data() + s.size(), *out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size() && std::isfinite(*out);
}

}  // namespace

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // shortest round trip: "-1.25e-05"
  const size_t epos = sci.find('e');
  const int exp = std::atoi(sci.c_str() + epos + 1);
  std::string sign, digits;
  for (size_t i = 0; i < epos; ++i) {
    if (sci[i] == '-') sign = "-";
    else if (sci[i] != '.') digits.push_back(sci[i]);
  }
  // Python switches to exponent notation below 1e-4 and from 1e16 on.
  if (exp < -4 || exp >= 16) {
    std::string m = digits.substr(0, 1);
    if (digits.size() > 1) m += "." + digits.substr(1);
    const int a = std::abs(exp);
    return sign + m + "e" + (exp < 0 ? "-" : "+") + (a < 10 ? "0" : "") + std::to_string(a);
  }
  if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t int_len = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_len) return sign + digits + std::string(int_len - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

std::string python_repr(const json::Value& v) {
  switch (v.kind()) {
    case json::Value::Kind::kNull: return "None";
    case json::Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case json::Value::Kind::kNumber: return v.is_integer_literal() ? int_str(v.as_number()) : python_float_repr(v.as_number());
    case json::Value::Kind::kString: return quote_python(v.as_string());
    case json::Value::Kind::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < v.items().size(); ++i) out += (i ? ", " : "") + python_repr(v.items()[i]);
      return out + "]";
    }
    case json::Value::Kind::kObject: {
      std::string out = "{";
      for (size_t i = 0; i < v.items().size(); ++i)
        out += (i ? ", " : "") + quote_python(v.keys()[i]) + ": " + python_repr(v.items()[i]);
      return out + "}";
    }
  }
  return "";
}

std::string stat_str(const TensorRecord& r, int s) {
  switch (r.kinds[s]) {
    case ValueKind::kNone: return "None";
    case ValueKind::kInt: return int_str(*r.stats[s]);
    case ValueKind::kFloat: return std::isnan(*r.stats[s]) ? "Nan" : python_float_repr(*r.stats[s]);
    case ValueKind::kBool: return *r.stats[s] != 0 ? "True" : "False";
    case ValueKind::kText: return lower(r.text) == "nan" ? "Nan" : r.text.str();
  }
  return "";
}

bool same_print(const TensorRecord& a, const TensorRecord& b, int s) {
  const ValueKind ka = a.kinds[s], kb = b.kinds[s];
  if (ka == kb && (ka == ValueKind::kInt || ka == ValueKind::kFloat || ka == ValueKind::kBool)) {
    const double x = *a.stats[s], y = *b.stats[s];
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
    // repr is shortest round trip, so equal doubles print alike, except 0.0
    // and -0.0 (an integer -0 is 0).
    return x == y && (ka != ValueKind::kFloat || std::signbit(x) == std::signbit(y));
  }
  if (ka == ValueKind::kNone && kb == ValueKind::kNone) return true;
  return stat_str(a, s) == stat_str(b, s);
}

std::string stat_cell(const TensorRecord& r, int s) {
  const ValueKind k = r.kinds[s];
  if (k == ValueKind::kInt || k == ValueKind::kFloat) return format_number(*r.stats[s]);
  return stat_str(r, s);
}

ValClass classify(const TensorRecord& r, int s, double* number) {
  const ValueKind k = r.kinds[s];
  if (k == ValueKind::kInt || k == ValueKind::kFloat) {
    const double v = *r.stats[s];
    if (std::isnan(v)) return ValClass::kNan;
    if (std::isinf(v)) return v > 0 ? ValClass::kInf : ValClass::kNegInf;
    *number = v;
    return ValClass::kNum;
  }
  if (k != ValueKind::kText) return ValClass::kOther;  // "None", "True", "False"
  const std::string t = lower(r.text);
  if (t == "nan") return ValClass::kNan;
  if (t == "inf") return ValClass::kInf;
  if (t == "-inf") return ValClass::kNegInf;
  if (t != "true" && t != "false" && parse_number(r.text, number)) return ValClass::kNum;
  if (t.find("npu") != std::string::npos || t.find("cpu") != std::string::npos || t.find("cuda") != std::string::npos)
    return ValClass::kDevice;
  if (r.text == "N/A") return ValClass::kNA;
  return ValClass::kOther;
}

bool is_inf_or_nan(const TensorRecord& r, int s) {
  if (r.kinds[s] == ValueKind::kFloat) return !std::isfinite(*r.stats[s]);
  if (r.kinds[s] != ValueKind::kText) return false;
  const std::string t = lower(strip(r.text));
  return t == "inf" || t == "-inf" || t == "nan";
}

bool python_equal(const TensorRecord& a, const TensorRecord& b, int s) {
  const bool an = is_number_kind(a.kinds[s]) && !std::isnan(*a.stats[s]);
  const bool bn = is_number_kind(b.kinds[s]) && !std::isnan(*b.stats[s]);
  // msprobe's bool statistics of tensors are the strings "True"/"False";
  // only non-tensor values reach this test, where True == 1 as in Python.
  if (an && bn) return *a.stats[s] == *b.stats[s];
  return stat_str(a, s) == stat_str(b, s);
}

}  // namespace graphprobe::compare
