#include "compare/noise_floor.h"

#include <string>

namespace graphprobe::compare {
namespace {

// Starting values: ~100x the relative rounding of one operation
// in the aggregate stats (eager vs inductor on float32 models shows ~1e-6),
// and for the extremes about an ulp of the dtype (bfloat16: 2^-7 = 7.8e-3,
// doubled; float8 e4m3: 2^-3; e5m2: 2^-2, doubled). Calibrated against
// clean eager/aot_eager/inductor pairs of real models; --floor-scale
// multiplies all of them for noisier hardware (TF32, HF32).
//
// The element column is one ulp of the dtype (2^(1-p) for p significant
// bits): what two correct results of one operation on equal inputs may
// differ by in one element (each within half an ulp of the exact value).
// Where a tensor's Norm rests on a few elements (a [8, 1] gate), its Mean,
// Norm and Sketch move like those elements, not like an average.
//
// The Sketch column is a relative L2 error: eager and compiled code that
// round differently move many elements by an ulp, which shows in it fully
// (float32: ~1e-7 per operation, ~1e-6 after a few layers; bfloat16 up to
// ~2e-3 where one side keeps a float32 intermediate). Its floors sit ~10x
// above that, far below the aggregate floor of float32: a redistribution
// the four statistics cannot see is judged on this column.
//
// The last column is the smallest normal number (float8: the larger of the
// fn and fnuz variants').
const std::vector<NoiseFloor> kTable = {
    {"float64", "torch.float64, torch.complex128", 1e-10, 1e-10, 1e-10, 0x1p-52, 0x1p-1022},
    {"float32", "torch.float32, torch.complex64, and floating dtypes not listed here", 1e-4, 1e-4, 2e-6, 0x1p-23,
     0x1p-126},
    {"float16", "torch.float16, torch.complex32", 1e-3, 2e-3, 1e-3, 0x1p-10, 0x1p-14},
    {"bfloat16", "torch.bfloat16", 2e-3, 1.6e-2, 5e-3, 0x1p-7, 0x1p-126},
    {"float8_e4m3", "torch.float8_e4m3fn, torch.float8_e4m3fnuz", 3e-2, 0.25, 6e-2, 0x1p-3, 0x1p-6},
    {"float8_e5m2", "torch.float8_e5m2, torch.float8_e5m2fnuz", 6e-2, 0.5, 0.12, 0x1p-2, 0x1p-14},
    {"exact", "integer and bool tensors, non-tensor values", 0.0, 0.0, 0.0, 0.0, 0.0},
};

enum Row : size_t { kF64 = 0, kF32, kF16, kBF16, kE4M3, kE5M2, kExact };

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

const std::vector<NoiseFloor>& noise_floor_table() { return kTable; }

const NoiseFloor& noise_floor_for(std::string_view dtype, bool is_tensor, bool* assumed) {
  if (assumed) *assumed = false;
  if (!is_tensor) return kTable[kExact];
  if (starts_with(dtype, "torch.")) dtype.remove_prefix(6);
  if (dtype == "float64" || dtype == "double" || dtype == "complex128" || dtype == "cdouble") return kTable[kF64];
  if (dtype == "float32" || dtype == "float" || dtype == "complex64" || dtype == "cfloat") return kTable[kF32];
  if (dtype == "float16" || dtype == "half" || dtype == "complex32" || dtype == "chalf") return kTable[kF16];
  if (dtype == "bfloat16") return kTable[kBF16];
  if (starts_with(dtype, "float8_e4m3")) return kTable[kE4M3];
  if (starts_with(dtype, "float8_e5m2")) return kTable[kE5M2];
  // int8 ... uint64, quantized qint8/quint8, bool: every value is exact.
  if (dtype == "bool" || dtype.find("int") != std::string_view::npos) return kTable[kExact];
  if (assumed) *assumed = true;
  return kTable[kF32];
}

}  // namespace graphprobe::compare
