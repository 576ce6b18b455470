#include "compare_tensors/msprobe_real_data.h"

#include <ATen/Dispatch_v2.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "compare_tensors/element_pairs.h"
#include "compare_tensors/tensor_metrics.h"

namespace graphprobe::compare_tensors {
namespace {

enum Cell { kCos = 0, kEuc = 1, kAbs = 2, kRel = 3, kOne = 4, kFive = 5 };

// msprobe's format_value: float('{:.12f}'.format(v)). printf and Python both
// round the exact binary value, so the results agree.
double rounded(double v, int decimals) {
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return std::strtod(buf, nullptr);
}

RealDataMetrics all(const char* token, std::string note) {
  RealDataMetrics m;
  for (auto& c : m.cells) c.token = token;
  m.notes.push_back(std::move(note));
  return m;
}

void set(RealDataMetrics& m, int cell, double v) {
  if (std::isnan(v)) m.cells[cell].token = "Nan";
  else m.cells[cell].value = v;
}

std::vector<int64_t> squeezed(at::IntArrayRef sizes) {
  std::vector<int64_t> out;
  for (int64_t s : sizes)
    if (s != 1) out.push_back(s);
  return out;
}

// The elements in row-major order as double (exact for every dtype msprobe
// reads as a float; int64 beyond 2^53 rounds, as numpy's astype(float) does).
std::vector<double> values(const at::Tensor& t) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(t.numel()));
  AT_DISPATCH_V2(t.scalar_type(), "graphprobe::msprobe_real_data", AT_WRAP([&] {
                   for_each_pair<scalar_t>(t, t, [&](scalar_t x, scalar_t) {
                     out.push_back(static_cast<double>(x));
                     return true;
                   });
                 }),
                 AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool, AT_EXPAND(AT_FLOAT8_TYPES),
                 AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  return out;
}

bool narrow_float(at::ScalarType s) { return s == at::kFloat || s == at::kHalf || s == at::kBFloat16; }

// get_relative_err for one element, in numpy's result type C.
template <typename C>
C relative_err(double x, double y) {
  C n = static_cast<C>(x), b = static_cast<C>(y);
  if (b == 0) {
    n += std::numeric_limits<C>::epsilon();
    b += std::numeric_limits<C>::epsilon();
  }
  return std::fabs((n - b) / b);
}

template <typename C>
void relative_metrics(const std::vector<double>& x, const std::vector<double>& y, bool ratios, RealDataMetrics& m) {
  const C one = static_cast<C>(kOneThousandth), five = static_cast<C>(kFiveThousandths);
  C max_rel = 0;
  bool nan = false;
  size_t within_1 = 0, within_5 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const C r = relative_err<C>(x[i], y[i]);
    nan |= std::isnan(r);
    if (r > max_rel) max_rel = r;
    within_1 += r < one;
    within_5 += r < five;
  }
  set(m, kRel, nan ? std::numeric_limits<double>::quiet_NaN() : rounded(static_cast<double>(max_rel), 12));
  if (!ratios) return;
  const double n = static_cast<double>(x.size());
  m.cells[kOne].value = rounded(static_cast<double>(within_1) / n, 12);
  m.cells[kFive].value = rounded(static_cast<double>(within_5) / n, 12);
}

// |x - y| of two 0-d arrays in numpy's result type of the two dtypes.
double scalar_abs_diff(double x, double y, at::ScalarType a, at::ScalarType b) {
  const double d = std::fabs(x - y);
  if (a == at::kHalf && b == at::kHalf) return static_cast<double>(static_cast<c10::Half>(static_cast<float>(d)));
  if (narrow_float(a) && narrow_float(b)) return static_cast<double>(static_cast<float>(d));
  return d;
}

// Both masks equal: zero those positions; otherwise false.
bool clear_non_finite(std::vector<double>& x, std::vector<double>& y) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i]) || std::isinf(x[i]) != std::isinf(y[i])) return false;
  }
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i])) x[i] = y[i] = 0;
  return true;
}

void cosine(const std::vector<double>& x, const std::vector<double>& y, RealDataMetrics& m) {
  double dot = 0, xx = 0, yy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    dot += x[i] * y[i];
    xx += x[i] * x[i];
    yy += y[i] * y[i];
  }
  const double eps = std::numeric_limits<double>::epsilon();
  const double nx = std::sqrt(xx), ny = std::sqrt(yy);
  if (nx <= eps && ny <= eps) {
    m.cells[kCos].value = 1.0;
  } else if (nx <= eps || ny <= eps) {
    m.cells[kCos].token = "Nan";
    m.notes.push_back(std::string("Cosine: all the ") + (nx <= eps ? "target" : "bench") + " data is zero");
  } else {
    const double c = dot / (nx * ny);
    if (std::isnan(c)) {
      m.cells[kCos].token = "Nan";
      return;
    }
    double r = rounded(c, 12);
    if (r > 0.9999) r = rounded(r, 6);
    m.cells[kCos].value = r;
  }
}

}  // namespace

RealDataMetrics msprobe_real_data(const at::Tensor& target, const at::Tensor& bench) {
  for (const at::Tensor* t : {&target, &bench})
    if (!comparable(*t)) throw TensorNotComparableError(not_comparable(*t));
  if (target.numel() == 0) return all("unsupported", "empty tensor: nothing to compare");
  if (squeezed(target.sizes()) != squeezed(bench.sizes()))
    return all("shape unmatched", "shape of the tensor files differs");
  std::vector<double> x = values(target), y = values(bench);
  const at::ScalarType ta = target.scalar_type(), tb = bench.scalar_type();
  const bool narrow = narrow_float(ta) && narrow_float(tb);
  RealDataMetrics m;
  if (x.size() == 1) {
    for (int c : {kCos, kEuc, kOne, kFive}) m.cells[c].token = "unsupported";
    m.notes.push_back("a single element: Cosine, EucDist and the Err Ratios are not computed");
    set(m, kAbs, rounded(scalar_abs_diff(x[0], y[0], ta, tb), 12));
    if (narrow) relative_metrics<float>(x, y, false, m);
    else relative_metrics<double>(x, y, false, m);
    return m;
  }
  if (!clear_non_finite(x, y)) return all("N/A", "NaN or inf at different positions in the tensor files");
  cosine(x, y, m);
  double sq = 0, max_abs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(x[i] - y[i]);
    sq += d * d;
    if (d > max_abs) max_abs = d;
  }
  set(m, kEuc, std::sqrt(sq));
  set(m, kAbs, rounded(max_abs, 12));
  if (narrow) relative_metrics<float>(x, y, true, m);
  else relative_metrics<double>(x, y, true, m);
  return m;
}

RealDataMetrics msprobe_real_data_files(const std::string& target_path, const std::string& bench_path) {
  const at::Tensor t = load_tensor_file(target_path);
  const at::Tensor b = load_tensor_file(bench_path);
  return msprobe_real_data(t, b);
}

}  // namespace graphprobe::compare_tensors
