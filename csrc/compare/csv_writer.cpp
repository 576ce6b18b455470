#include "compare/csv_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compare/cell_text.h"
#include "compare/msprobe_values.h"
#include "compare/shortest_double.h"
#include "format/json_writer.h"
#include "fs/atomic_file.h"

namespace graphprobe::compare {
namespace {

const char* kNA = "N/A";

std::string num(const std::optional<double>& v) { return v ? format_number(*v) : kNA; }

std::string flag(const std::optional<bool>& b) { return b ? (*b ? "True" : "False") : kNA; }

// A Python str's repr, as msprobe's Data_name cell shows it: ASCII control
// characters as Python spells them (\t \n \r, else \xNN), so no raw NUL or
// line break reaches the cell.
std::string py_repr(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == q || c == '\\') {
      out.push_back('\\');
    } else if (u < 0x20 || u == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += c == '\t' ? "\\t" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : std::string("\\x") + hex[u >> 4] + hex[u & 15];
      continue;
    }
    out.push_back(c);
  }
  out.push_back(q);
  return out;
}

// msprobe's Data_name cell: the Python list [target file, bench file], "-1"
// for a record without a file (a non-tensor value), "N/A" for a missing side.
std::string data_names(bool has_t, const TensorRecord& t, bool has_b, const TensorRecord& b) {
  auto one = [](bool has, const TensorRecord& r) -> std::string {
    if (!has) return kNA;
    return r.data_name.str().empty() ? "-1" : r.data_name.str();
  };
  return csv_text("[" + py_repr(one(has_t, t)) + ", " + py_repr(one(has_b, b)) + "]");
}

// A real-data metric cell: msprobe's word, the number, or "unsupported"
// (msprobe's word for rows it could not compare, unmatched ones included).
std::string real_data_cell(const TensorMetrics& m, int i) {
  if (m.words[i] != CellWord::kNone) return word_name(m.words[i]);
  if (m.values[i]) return format_number(*m.values[i]);
  return "unsupported";
}

}  // namespace

const std::vector<std::string>& csv_header(bool tensor_columns, TensorLayout layout) {
  static const std::vector<std::string> header = {
      "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
      "NPU Requires_grad", "Bench Requires_grad", "Max diff", "Min diff", "Mean diff", "L2norm diff",
      "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr", "NPU max", "NPU min", "NPU mean",
      "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm", "Requires_grad Consistent", "Result",
      "Err_message",
      // graphprobe's own, after msprobe's:
      "Match", "First Divergence"};
  static const std::vector<std::string> tensor_header = [] {
    std::vector<std::string> h(header.begin(), header.end() - 2);
    // msprobe's real-data columns, in its order (TensorMetric order).
    // "Tensor MaxRelativeErr": the statistics columns already hold a MaxRelativeErr.
    for (int m = 0; m < kNumTensorMetrics; ++m)
      h.emplace_back(m == kMaxRelErr ? std::string("Tensor ") + kTensorMetricNames[m] : kTensorMetricNames[m]);
    h.insert(h.end(), header.end() - 2, header.end());
    return h;
  }();
  // msprobe's COMPARE_RESULT_HEADER + Data_name (26.2.0), then ours.
  static const std::vector<std::string> real_data_header = [] {
    std::vector<std::string> h(header.begin(), header.begin() + 8);  // names, dtypes, shapes, requires_grad
    h.insert(h.end(), kTensorMetricNames.begin(), kTensorMetricNames.end());
    h.insert(h.end(), header.end() - 13, header.end() - 2);  // NPU max ... Err_message
    for (const char* c : {"Data_name", "Match", "First Divergence"}) h.emplace_back(c);
    return h;
  }();
  if (!tensor_columns) return header;
  return layout == TensorLayout::kMsprobe ? real_data_header : tensor_header;
}

namespace {

// Whether `s` holds a byte below '-', among which are all that quoting and
// csv_text look for (, " CR LF NUL, and the space). Names, dtypes and
// numbers rarely hold any: this loop has no early exit, so the compiler
// vectorises it, and the exact loops below run only where it says yes.
bool any_below_dash(std::string_view s) {
  unsigned char below = 0;
  for (char c : s) below |= static_cast<unsigned char>(static_cast<unsigned char>(c) < '-');
  return below != 0;
}

// Whether a cell must be quoted. A plain loop: string_view::find_first_of
// calls memchr once per character of the cell, which made it the costliest
// step of writing the CSV.
bool needs_quotes(std::string_view s) {
  if (!any_below_dash(s)) return false;
  for (char c : s)
    if (c == ',' || c == '"' || c == '\r' || c == '\n') return true;
  return !s.empty() && (s.front() == ' ' || s.back() == ' ');
}

}  // namespace

std::string csv_field(std::string_view s) {
  if (!needs_quotes(s)) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string csv_text(std::string_view s) {
  std::string out;
  if (!s.empty() && std::string_view("=+-@\t\r").find(s.front()) != std::string_view::npos) out.push_back('\'');
  // A NUL (legal in a dump's JSON strings as \u0000) is written as that
  // escape: a raw NUL byte ends the cell for C-string tools and spreadsheets.
  for (size_t pos = 0;;) {
    const size_t nul = s.find('\0', pos);
    out.append(s.substr(pos, nul == std::string_view::npos ? std::string_view::npos : nul - pos));
    if (nul == std::string_view::npos) break;
    out += "\\u0000";
    pos = nul + 1;
  }
  return out;
}

namespace {

// A statistic's cell. The value of a non-tensor argument is text from the
// dump (a string the model was called with) and is neutralised like names;
// numbers are never touched.
std::string stat_text(const TensorRecord& r, int s) {
  return r.kinds[s] == ValueKind::kText ? csv_text(stat_cell(r, s)) : stat_cell(r, s);
}

// Text that csv_text leaves as it is and that needs no quotes.
bool plain_text(std::string_view s) {
  if (s.empty()) return true;
  if (std::string_view("=+-@\t\r").find(s.front()) != std::string_view::npos) return false;
  if (!any_below_dash(s)) return true;
  for (char c : s)
    if (c == ',' || c == '"' || c == '\r' || c == '\n' || c == '\0') return false;
  return s.front() != ' ' && s.back() != ' ';
}

// Renders rows [begin, end) -- and the header when begin is 0 -- onto `out`.
// A row's run of number cells, written into a buffer on the stack and
// appended to the chunk at once when another kind of cell (or the line's
// end) comes: appending each number to the std::string (append_number)
// resized it twice a number, zero-filling kShortestDoubleRoom bytes each
// time -- ~10 ns of a number's ~50.
class NumberRun {
 public:
  // Room for a row's sixteen numbers with their commas and '%'.
  static constexpr size_t kRoom = 1024;
  explicit NumberRun(std::string& out) : out_(out) {}
  NumberRun(const NumberRun&) = delete;
  NumberRun& operator=(const NumberRun&) = delete;
  ~NumberRun() { flush(); }

  void push_back(char c) {
    if (n_ + 1 > kRoom) flush();
    buf_[n_++] = c;
  }
  // Finite or not, as append_number writes it.
  void number(double v) {
    if (n_ + kShortestDoubleRoom > kRoom) flush();
    if (std::isnan(v)) return text("nan");
    if (std::isinf(v)) return text(v > 0 ? "inf" : "-inf");
    n_ = static_cast<size_t>(write_shortest(buf_ + n_, v) - buf_);
  }
  void flush() {
    if (n_ == 0) return;
    out_.append(buf_, n_);
    n_ = 0;
  }

 private:
  void text(std::string_view t) {
    std::memcpy(buf_ + n_, t.data(), t.size());
    n_ += t.size();
  }
  std::string& out_;
  size_t n_ = 0;
  char buf_[kRoom];
};

void render_rows(const CompareResult& result, size_t begin, size_t end, std::string& out) {
  // Cells are appended in place: a vector of strings per row made this the
  // slowest part of a 100k-row compare.
  bool first = true;
  NumberRun numbers(out);
  auto cell = [&out, &first, &numbers](std::string_view v) {
    numbers.flush();
    if (!first) out.push_back(',');
    first = false;
    if (!needs_quotes(v))
      out.append(v);
    else
      out += csv_field(v);
  };
  auto end_line = [&out, &first, &numbers]() {
    numbers.flush();
    out.push_back('\n');  // pandas (msprobe) writes \n; csv readers accept it
    first = true;
  };
  auto text_cell = [&](bool has, std::string_view v) {
    // Most names and dtypes are plain (csv_text leaves them as they are and
    // they need no quotes): appended without the copies csv_text makes.
    if (has && plain_text(v)) {
      numbers.flush();
      if (!first) out.push_back(',');
      first = false;
      out.append(v);
      return;
    }
    cell(has ? csv_text(v) : std::string(kNA));
  };
  // Numbers need no quotes (digits, '.', 'e', '-', "nan", "inf").
  auto number_cell = [&](double v) {
    if (!first) numbers.push_back(',');
    first = false;
    numbers.number(v);
  };
  // The last shape's cell, kept: a row's two shapes are mostly alike, and
  // so are the rows of one layer after another.
  Shape last_shape;  // a view into the dump, which outlives the CSV
  std::string last_shape_cell;
  auto shape_cell = [&](bool has, const TensorRecord& r) {
    if (!has || !r.shape_text.empty()) return cell(has ? shape_of(r) : kNA);
    numbers.flush();
    if (!first) out.push_back(',');
    first = false;
    if (r.shape == last_shape && !last_shape_cell.empty()) {
      out += last_shape_cell;
      return;
    }
    const size_t at = out.size();
    // "[8, 4096]" holds a comma: quoted; "[]" and "[8]" do not.
    const bool quoted = r.shape.size() > 1;
    if (quoted) out.push_back('"');
    append_shape(out, r.shape);
    if (quoted) out.push_back('"');
    last_shape = r.shape;
    last_shape_cell.assign(out, at, std::string::npos);
  };
  // A statistic's cell; a number is stat_cell's format_number.
  auto stat_value_cell = [&](bool has, const TensorRecord& r, int s) {
    if (has && (r.kinds[s] == ValueKind::kInt || r.kinds[s] == ValueKind::kFloat)) return number_cell(*r.stats[s]);
    cell(has ? stat_text(r, s) : kNA);
  };
  if (begin == 0) {
    for (const auto& h : csv_header(result.tensor_mode, result.tensor_layout)) cell(h);
    end_line();
  }
  const bool real_data = result.tensor_mode && result.tensor_layout == TensorLayout::kMsprobe;
  const TensorRecord empty;
  for (size_t i = begin; i < end; ++i) {
    const CompareRow& r = result.rows[i];
    const bool has_t = r.target >= 0, has_b = r.bench >= 0;
    const TensorRecord& t = has_t ? result.target.rows[static_cast<size_t>(r.target)] : empty;
    const TensorRecord& b = has_b ? result.bench.rows[static_cast<size_t>(r.bench)] : empty;
    text_cell(has_t, t.name);
    text_cell(has_b, b.name);
    text_cell(has_t, t.dtype);
    text_cell(has_b, b.dtype);
    shape_cell(has_t, t);
    shape_cell(has_b, b);
    cell(flag(t.requires_grad));
    cell(flag(b.requires_grad));
    if (real_data) {
      for (int m = 0; m < kNumTensorMetrics; ++m) cell(real_data_cell(*r.tensor, m));
    } else {
      // The numbers of diff_cell and rel_cell (metrics.cpp) appended in
      // place; their words as they give them.
      for (int s = 0; s < kNumStats; ++s) {
        const StatDiff k = r.metrics.kind[s];
        if (k == StatDiff::kNumbers || k == StatDiff::kBenchZero) number_cell(*r.metrics.diff[s]);
        else cell(diff_cell(r.metrics, s));
      }
      for (int s = 0; s < kNumStats; ++s) {
        if (r.metrics.kind[s] == StatDiff::kNumbers) {
          number_cell(*r.metrics.rel_pct[s]);
          numbers.push_back('%');
        } else {
          cell(rel_cell(r.metrics, s));
        }
      }
    }
    for (int s = 0; s < kNumStats; ++s) stat_value_cell(has_t, t, s);
    for (int s = 0; s < kNumStats; ++s) stat_value_cell(has_b, b, s);
    if (t.requires_grad && b.requires_grad) cell(*t.requires_grad == *b.requires_grad ? "True" : "False");
    else cell(kNA);
    cell(verdict_name(r.verdict));
    if (r.reasons->empty()) {
      cell("[]");
    } else {
      json::Writer w(0);
      w.begin_array();
      for (const auto& reason : *r.reasons) w.value_string(reason);
      w.end_array();
      cell(w.str());
    }
    if (real_data) cell(data_names(has_t, t, has_b, b));
    else if (result.tensor_mode)
      for (int m = 0; m < kNumTensorMetrics; ++m) cell(num(r.tensor->values[m]));
    cell(match_name(r.match));
    cell(r.first_divergence ? "yes" : "");
    end_line();
  }
}

constexpr size_t kRowsPerChunk = 128;

}  // namespace

std::string render_csv(const CompareResult& result) {
  std::string out;
  out.reserve(512 * (result.rows.size() + 1));
  render_rows(result, 0, result.rows.size(), out);
  return out;
}

void write_csv(const CompareResult& result, const std::string& path) {
  fs::AtomicFile file(path);
  std::string chunk;
  chunk.reserve(512 * (kRowsPerChunk + 1));
  for (size_t begin = 0; begin == 0 || begin < result.rows.size(); begin += kRowsPerChunk) {
    chunk.clear();
    render_rows(result, begin, std::min(begin + kRowsPerChunk, result.rows.size()), chunk);
    file.append(chunk);
  }
  file.commit();
}

}  // namespace graphprobe::compare
