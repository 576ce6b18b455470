#pragma once
// Which statistics a record carries, by the kind of its tensor's elements
// (stats::value_kind maps a dtype to it). Torch-free.

namespace graphprobe {

enum class ValueKind : int { kFloating = 0, kIntegral = 1, kBoolean = 2, kNoStats = 3 };

}  // namespace graphprobe
