#pragma once
// A dtype's name as msprobe writes it in dump.json ("torch.float32").

#include <c10/core/ScalarType.h>

#include <string>

namespace graphprobe {

std::string dtype_name(c10::ScalarType t);

}  // namespace graphprobe
