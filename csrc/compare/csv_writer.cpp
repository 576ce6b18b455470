#include "compare/csv_writer.h"

#include <cmath>

#include "compare/msprobe_values.h"
#include "format/json_writer.h"
#include "fs/atomic_file.h"

namespace graphprobe::compare {
namespace {

const char* kNA = "N/A";

std::string num(const std::optional<double>& v) { return v ? format_number(*v) : kNA; }

std::string flag(const std::optional<bool>& b) { return b ? (*b ? "True" : "False") : kNA; }

}  // namespace

const std::vector<std::string>& csv_header(bool tensor_columns) {
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
    for (const char* c : {"Cosine", "EucDist", "MaxAbsErr", "Tensor MaxRelativeErr", "One Thousandth Err Ratio",
                          "Five Thousandths Err Ratio"})
      h.emplace_back(c);
    h.insert(h.end(), header.end() - 2, header.end());
    return h;
  }();
  return tensor_columns ? tensor_header : header;
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos && (s.empty() || (s.front() != ' ' && s.back() != ' ')))
    return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string render_csv(const CompareResult& result) {
  std::string out;
  out.reserve(512 * (result.rows.size() + 1));
  // Cells are appended in place: a vector of strings per row made this the
  // slowest part of a 100k-row compare.
  bool first = true;
  auto cell = [&out, &first](std::string_view v) {
    if (!first) out.push_back(',');
    first = false;
    if (v.find_first_of(",\"\r\n") == std::string_view::npos && (v.empty() || (v.front() != ' ' && v.back() != ' ')))
      out.append(v);
    else
      out += csv_field(v);
  };
  auto end_line = [&out, &first]() {
    out.push_back('\n');  // pandas (msprobe) writes \n; csv readers accept it
    first = true;
  };
  for (const auto& h : csv_header(result.tensor_mode)) cell(h);
  end_line();
  const TensorRecord empty;
  for (const CompareRow& r : result.rows) {
    const bool has_t = r.target >= 0, has_b = r.bench >= 0;
    const TensorRecord& t = has_t ? result.target.rows[static_cast<size_t>(r.target)] : empty;
    const TensorRecord& b = has_b ? result.bench.rows[static_cast<size_t>(r.bench)] : empty;
    cell(has_t ? std::string_view(t.name) : kNA);
    cell(has_b ? std::string_view(b.name) : kNA);
    cell(has_t ? std::string_view(t.dtype) : kNA);
    cell(has_b ? std::string_view(b.dtype) : kNA);
    cell(has_t ? shape_of(t) : kNA);
    cell(has_b ? shape_of(b) : kNA);
    cell(flag(t.requires_grad));
    cell(flag(b.requires_grad));
    for (int s = 0; s < kNumStats; ++s) cell(diff_cell(r.metrics, s));
    for (int s = 0; s < kNumStats; ++s) cell(rel_cell(r.metrics, s));
    for (int s = 0; s < kNumStats; ++s) cell(has_t ? stat_cell(t, s) : kNA);
    for (int s = 0; s < kNumStats; ++s) cell(has_b ? stat_cell(b, s) : kNA);
    if (t.requires_grad && b.requires_grad) cell(*t.requires_grad == *b.requires_grad ? "True" : "False");
    else cell(kNA);
    cell(verdict_name(r.verdict));
    if (r.reasons.empty()) {
      cell("[]");
    } else {
      json::Writer w(0);
      w.begin_array();
      for (const auto& reason : r.reasons) w.value_string(reason);
      w.end_array();
      cell(w.str());
    }
    if (result.tensor_mode)
      for (int m = 0; m < kNumTensorMetrics; ++m) cell(num(r.tensor.values[m]));
    cell(match_name(r.match));
    cell(r.first_divergence ? "yes" : "");
    end_line();
  }
  return out;
}

void write_csv(const CompareResult& result, const std::string& path) {
  fs::write_file_atomic(path, render_csv(result));
}

}  // namespace graphprobe::compare
