#pragma once
// Real-data compare metrics of two dumped tensors (msprobe's tensor-mode
// columns). Torch-backed: loading a torch.save archive needs torch's
// unpickler. The compare engine itself (csrc/compare) stays torch-free and
// receives these values through Python.
//
// Definitions (t = target element, b = bench element, both read as double,
// n = numel; docs/formats.md, "compare CSV", repeats them):
//  * non-finite values: a position where both sides hold the same non-finite
//    value (NaN and NaN, +inf and +inf, -inf and -inf) counts as 0 vs 0, as in
//    msprobe; any other non-finite position makes every metric NaN, with a
//    note (msprobe: "The position of inf or nan ... do not match").
//  * Cosine = sum(t*b) / sqrt(sum(t^2) sum(b^2)), clamped to [-1, 1]. Both norms <= DBL_EPSILON
//    -> 1; one of them -> NaN with a note; n == 1 -> NaN with a note (always
//    +-1, says nothing).
//  * EucDist = sqrt(sum((t - b)^2)).
//  * MaxAbsErr = max |t - b|.
//  * relative error of an element = |t - b| / |b|; where b == 0 it is
//    |t| / eps (msprobe adds eps to both sides there), eps = float32's machine
//    epsilon for float16/bfloat16/float32 tensors and float64's otherwise. So
//    t == b == 0 is exact and t != 0 against 0 is a large, finite error.
//  * MaxRelativeErr = max relative error (a ratio, not a percentage).
//  * One Thousandth / Five Thousandths Err Ratio = share of elements whose
//    relative error is < 0.001 / < 0.005.
// One pass over both tensors in their own dtype and strides; sums in double.
// No ATen op runs on the data (see for_each_pair in the .cpp: fork safety).

#include <ATen/core/Tensor.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace graphprobe::compare_tensors {

// A tensor file that cannot be read, or does not hold one tensor.
class TensorFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Two tensors that cannot be compared element by element (dtype or shape
// differ, or a dtype without an order such as complex).
class TensorMismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Two tensors of a dtype the metrics are not defined for (not comparable()):
// the row is reported as not compared, not as a mismatch.
class TensorNotComparableError : public TensorMismatchError {
 public:
  using TensorMismatchError::TensorMismatchError;
};

constexpr double kOneThousandth = 0.001;
constexpr double kFiveThousandths = 0.005;

struct TensorMetrics {
  // Absent for empty tensors (nothing to compare); NaN where undefined.
  std::optional<double> cosine;
  std::optional<double> euc_dist;
  std::optional<double> max_abs_err;
  std::optional<double> max_rel_err;
  std::optional<double> one_thousandth_err_ratio;
  std::optional<double> five_thousandths_err_ratio;
  // Why a value is NaN or absent, for Err_message.
  std::vector<std::string> notes;
};

// Reads a torch.save archive (zip format) holding one tensor, as a CPU
// tensor whatever device it was saved from; every size, stride and offset is
// checked against what the file holds (format/pt_archive.h). Throws
// TensorFileError naming the file and what is wrong with it.
at::Tensor load_tensor_file(const std::string& path);

// Whether the metrics are defined for t's dtype: bool, the integer types
// (uint16/32/64 included), float16, bfloat16, float32, float64 and the float8
// types (read as float64). Not complex (no order), float4_e2m1fn_x2 (packed
// pairs) or the bits types (raw bits).
bool comparable(const at::Tensor& t);
// Why not, for the error message.
std::string not_comparable(const at::Tensor& t);

// Throws TensorMismatchError when dtype or shape differ, and
// TensorNotComparableError when the dtype is not comparable().
TensorMetrics compute_tensor_metrics(const at::Tensor& target, const at::Tensor& bench);

// load_tensor_file on both, then compute_tensor_metrics.
TensorMetrics compare_tensor_files(const std::string& target_path, const std::string& bench_path);

}  // namespace graphprobe::compare_tensors
