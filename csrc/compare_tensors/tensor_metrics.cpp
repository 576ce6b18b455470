#include "compare_tensors/tensor_metrics.h"

#include "compare_tensors/element_pairs.h"
#include "format/pt_archive.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

namespace graphprobe::compare_tensors {
namespace {

std::string dtype_name(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kBool: return "torch.bool";
    case at::kByte: return "torch.uint8";
    case at::kChar: return "torch.int8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    default: {
      // torch's Python names, from the table of the file reader.
      for (const auto& d : pt::all_dtypes())
        if (std::strcmp(d.c10_name, c10::toString(s)) == 0) return std::string("torch.") + d.name;
      return c10::toString(s);
    }
  }
}

std::string shape_str(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

// The ScalarType whose c10 name the file's dtype has.
at::ScalarType scalar_type_of(const pt::DtypeInfo& d, const std::string& path) {
  for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions); ++i) {
    const auto st = static_cast<at::ScalarType>(i);
    if (std::strcmp(c10::toString(st), d.c10_name) == 0) return st;
  }
  throw TensorFileError("tensor file '" + path + "' holds dtype torch." + d.name + ", which this torch does not have");
}

// Running sums of one pass; see the header for what each becomes.
struct Accumulator {
  double dot = 0, tt = 0, bb = 0, sq = 0, max_abs = 0, max_rel = 0;
  int64_t within_1 = 0, within_5 = 0;
  int64_t mismatch_at = -1;  // first position with unmatched non-finite values
  double mismatch_t = 0, mismatch_b = 0;
};

template <typename T>
Accumulator accumulate(const at::Tensor& t, const at::Tensor& b, double eps) {
  Accumulator a;
  int64_t i = 0;
  for_each_pair<T>(t, b, [&](T tv, T bv) {
    double x = static_cast<double>(tv);
    double y = static_cast<double>(bv);
    if (!std::isfinite(x) || !std::isfinite(y)) {
      // Same non-finite value on both sides (x == y covers same-signed inf).
      if (!((std::isnan(x) && std::isnan(y)) || x == y)) {
        a.mismatch_at = i;
        a.mismatch_t = x;
        a.mismatch_b = y;
        return false;
      }
      x = y = 0.0;
    }
    const double d = std::fabs(x - y);
    a.dot += x * y;
    a.tt += x * x;
    a.bb += y * y;
    a.sq += d * d;
    a.max_abs = std::max(a.max_abs, d);
    const double rel = y == 0.0 ? std::fabs(x) / eps : d / std::fabs(y);
    a.max_rel = std::max(a.max_rel, rel);
    a.within_1 += rel < kOneThousandth;
    a.within_5 += rel < kFiveThousandths;
    ++i;
    return true;
  });
  return a;
}

}  // namespace

bool comparable(const at::Tensor& t) {
  const at::ScalarType s = t.scalar_type();
  return t.layout() == at::kStrided && !t.is_quantized() &&
         (c10::isIntegralType(s, /*includeBool=*/true) || c10::isFloat8Type(s) || s == at::kFloat ||
          s == at::kDouble || s == at::kHalf || s == at::kBFloat16);
}

std::string not_comparable(const at::Tensor& t) {
  const at::ScalarType s = t.scalar_type();
  std::string why = "their values have no order";  // complex
  if (s == at::kFloat4_e2m1fn_x2) why = "two 4-bit values are packed in each element";
  else if (!t.is_complex()) why = "their elements are raw bits, not numbers";
  return "tensors of dtype " + dtype_name(s) + " are not supported: " + why +
         " (compared are bool, the integer types, float16, bfloat16, float32, float64 and the float8 types)";
}

at::Tensor load_tensor_file(const std::string& path) {
  // Not torch::jit::pickle_load: it trusts the sizes in the pickle (see
  // format/pt_archive.h). The layout read here is checked against what the
  // file holds; set_ checks it once more.
  pt::TensorLayout layout;
  try {
    layout = pt::read_tensor_layout(path);
  } catch (const pt::FormatError& e) {
    throw TensorFileError(e.what());
  }
  const at::ScalarType st = scalar_type_of(*layout.dtype, path);
  // The storage as bytes, wherever it was saved from (the compare reads values only).
  at::Tensor bytes = at::empty({static_cast<int64_t>(layout.storage_bytes)}, at::TensorOptions().dtype(at::kByte));
  try {
    pt::read_storage(path, layout, bytes.data_ptr());
  } catch (const pt::FormatError& e) {
    throw TensorFileError(e.what());
  }
  at::Tensor t = at::empty({0}, at::TensorOptions().dtype(st));
  try {
    t.set_(bytes.storage(), layout.storage_offset, layout.sizes, layout.strides);
  } catch (const c10::Error& e) {
    throw TensorFileError("tensor file '" + path + "': " + e.what_without_backtrace());
  }
  return t;
}

TensorMetrics compute_tensor_metrics(const at::Tensor& target, const at::Tensor& bench) {
  if (target.scalar_type() != bench.scalar_type())
    throw TensorMismatchError("dtype mismatch in the tensor files: " + dtype_name(target.scalar_type()) + " vs " +
                              dtype_name(bench.scalar_type()));
  if (target.sizes() != bench.sizes())
    throw TensorMismatchError("shape mismatch in the tensor files: " + shape_str(target.sizes()) + " vs " +
                              shape_str(bench.sizes()));
  if (!comparable(target)) throw TensorNotComparableError(not_comparable(target));

  TensorMetrics m;
  const int64_t n = target.numel();
  if (n == 0) {
    m.notes.push_back("empty tensor: nothing to compare");
    return m;
  }
  const at::ScalarType st = target.scalar_type();
  const bool narrow_float = st == at::kFloat || st == at::kHalf || st == at::kBFloat16;
  const double eps = narrow_float ? static_cast<double>(std::numeric_limits<float>::epsilon())
                                  : std::numeric_limits<double>::epsilon();
  Accumulator a;
  // float8 and uint16/32/64 too: every element is read as a double (exact
  // for all of them but uint64 beyond 2^53, which rounds).
  AT_DISPATCH_V2(st, "graphprobe::compute_tensor_metrics",
                 AT_WRAP([&] { a = accumulate<scalar_t>(target, bench, eps); }),
                 AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool, AT_EXPAND(AT_FLOAT8_TYPES),
                 AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));

  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (a.mismatch_at >= 0) {
    m.cosine = m.euc_dist = m.max_abs_err = m.max_rel_err = m.one_thousandth_err_ratio =
        m.five_thousandths_err_ratio = nan;
    m.notes.push_back("non-finite values at different positions (first at flat index " +
                      std::to_string(a.mismatch_at) + ": target " + num(a.mismatch_t) + ", bench " +
                      num(a.mismatch_b) + "): tensor metrics are nan");
    return m;
  }
  m.euc_dist = std::sqrt(a.sq);
  m.max_abs_err = a.max_abs;
  m.max_rel_err = a.max_rel;
  m.one_thousandth_err_ratio = static_cast<double>(a.within_1) / static_cast<double>(n);
  m.five_thousandths_err_ratio = static_cast<double>(a.within_5) / static_cast<double>(n);

  const double dbl_eps = std::numeric_limits<double>::epsilon();
  const double nt = std::sqrt(a.tt), nb = std::sqrt(a.bb);
  if (n == 1) {
    m.cosine = nan;
    m.notes.push_back("Cosine: not defined for a single element");
  } else if (nt <= dbl_eps && nb <= dbl_eps) {
    m.cosine = 1.0;
  } else if (nt <= dbl_eps) {
    m.cosine = nan;
    m.notes.push_back("Cosine: all the target data is zero");
  } else if (nb <= dbl_eps) {
    m.cosine = nan;
    m.notes.push_back("Cosine: all the bench data is zero");
  } else {
    // sqrt(tt * bb) rather than nt * nb: exactly 1 for identical tensors
    // (sqrt of a rounded square is exact); the product only when that overflows.
    const double denom = std::isfinite(a.tt * a.bb) ? std::sqrt(a.tt * a.bb) : nt * nb;
    m.cosine = std::clamp(a.dot / denom, -1.0, 1.0);
  }
  return m;
}

TensorMetrics compare_tensor_files(const std::string& target_path, const std::string& bench_path) {
  const at::Tensor t = load_tensor_file(target_path);
  const at::Tensor b = load_tensor_file(bench_path);
  return compute_tensor_metrics(t, b);
}

}  // namespace graphprobe::compare_tensors
