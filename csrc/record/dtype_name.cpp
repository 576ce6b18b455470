#include "record/dtype_name.h"

#include <algorithm>

namespace graphprobe {

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case c10::ScalarType::Half: return "torch.float16";
    case c10::ScalarType::BFloat16: return "torch.bfloat16";
    case c10::ScalarType::Long: return "torch.int64";
    case c10::ScalarType::Int: return "torch.int32";
    case c10::ScalarType::Short: return "torch.int16";
    case c10::ScalarType::Char: return "torch.int8";
    case c10::ScalarType::Byte: return "torch.uint8";
    case c10::ScalarType::Bool: return "torch.bool";
    case c10::ScalarType::ComplexFloat: return "torch.complex64";
    case c10::ScalarType::ComplexDouble: return "torch.complex128";
    default: {
      std::string s = c10::toString(t);
      std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
      return "torch." + s;
    }
  }
}

}  // namespace graphprobe
