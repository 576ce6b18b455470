#pragma once
// msprobe's real-data compare of two dumped tensors, reproduced: the six
// metric cells its CSV holds for one row (Cosine, EucDist, MaxAbsErr,
// MaxRelativeErr, One Thousandth Err Ratio, Five Thousandths Err Ratio), each
// a number or one of msprobe's words. Torch-backed (the tensors come from
// torch.save files). Source: mindstudio-probe 26.2.0,
// msprobe/core/compare/npy_compare.py (ValidateTensor, handle_inf_nan) and
// algorithm/builtin_algorithm/*.py; docs/formats.md has the table.
//
// In the order msprobe checks (the first that applies decides):
//  * target empty -> every cell "unsupported";
//  * shapes differ after numpy.squeeze (size-1 dimensions dropped) ->
//    every cell "shape unmatched";
//  * a single element (0-d after squeeze) -> Cosine, EucDist and the ratios
//    "unsupported"; MaxAbsErr and MaxRelativeErr computed (no NaN/inf
//    handling; NaN gives "Nan");
//  * NaN or inf at positions that differ between the sides (the NaN masks
//    and the inf masks must both be equal; +inf against -inf is equal) ->
//    every cell "N/A"; equal masks: those positions count as 0 vs 0;
//  * otherwise (dtypes may differ) the metrics, with x = target, y = bench:
//    - Cosine = sum(x*y) / (|x| |y|) in float64; both norms <= DBL_EPSILON
//      -> 1.0, one of them -> "Nan"; rounded to 12 decimals, and to 6 when
//      above 0.9999; not clamped;
//    - EucDist = sqrt(sum((x - y)^2)) in float64, not rounded;
//    - MaxAbsErr = max |x - y| in float64, rounded to 12 decimals;
//    - relative error per element = |(x - y) / y|, computed in float32 when
//      both dtypes are float16, bfloat16 or float32 (numpy's result type with
//      float32), in float64 otherwise; where y == 0 both x and y first get
//      that type's machine epsilon added;
//    - MaxRelativeErr = its maximum; the ratios = the share of elements
//      whose relative error is below 0.001 / 0.005 (compared in the same
//      type); all three rounded to 12 decimals.
// A metric that comes out NaN is "Nan".

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace graphprobe::compare_tensors {

// One CSV cell: a number, or (token non-empty) one of msprobe's words.
struct RealDataCell {
  std::optional<double> value;
  std::string token;
};

struct RealDataMetrics {
  std::array<RealDataCell, 6> cells;  // msprobe's column order
  std::vector<std::string> notes;     // why cells are words, for Err_message
};

// Throws TensorNotComparableError for tensors that are not comparable()
// (tensor_metrics.h: complex, float4_e2m1fn_x2, the bits types, not
// strided). float8 and uint16/32/64 are read as float64 (msprobe itself
// cannot read float8 through numpy; graphprobe compares them as float64).
RealDataMetrics msprobe_real_data(const at::Tensor& target, const at::Tensor& bench);

// load_tensor_file on both, then msprobe_real_data.
RealDataMetrics msprobe_real_data_files(const std::string& target_path, const std::string& bench_path);

}  // namespace graphprobe::compare_tensors
