#pragma once
// The element types the statistics kernels reduce: one list for the CPU
// kernels, the CUDA launcher and the record's value kind, so that a dtype is
// reduced on every device or on none (its record then carries no statistics
// and a CUDA probe only stamps its row). Complex, packed (float4) and
// quantised types are not reduced.

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>

#include "record/value_kind.h"

// _(C++ element type, c10::ScalarType name)
#define GRAPHPROBE_FORALL_REDUCIBLE_TYPES(_) \
  _(bool, Bool)                              \
  _(uint8_t, Byte)                           \
  _(int8_t, Char)                            \
  _(int16_t, Short)                          \
  _(int32_t, Int)                            \
  _(int64_t, Long)                           \
  _(uint16_t, UInt16)                        \
  _(uint32_t, UInt32)                        \
  _(uint64_t, UInt64)                        \
  _(c10::Half, Half)                         \
  _(c10::BFloat16, BFloat16)                 \
  _(float, Float)                            \
  _(double, Double)                          \
  _(c10::Float8_e5m2, Float8_e5m2)           \
  _(c10::Float8_e4m3fn, Float8_e4m3fn)       \
  _(c10::Float8_e5m2fnuz, Float8_e5m2fnuz)   \
  _(c10::Float8_e4m3fnuz, Float8_e4m3fnuz)   \
  _(c10::Float8_e8m0fnu, Float8_e8m0fnu)

namespace graphprobe::stats {

// Whether the statistics kernels reduce elements of type `t`.
constexpr bool reducible(c10::ScalarType t) {
  switch (t) {
#define GRAPHPROBE_REDUCIBLE_CASE(ctype, name) case c10::ScalarType::name:
    GRAPHPROBE_FORALL_REDUCIBLE_TYPES(GRAPHPROBE_REDUCIBLE_CASE)
#undef GRAPHPROBE_REDUCIBLE_CASE
    return true;
    default:
      return false;
  }
}

// Which statistics a tensor of type `t` gets (none: only its row is stamped).
inline ValueKind value_kind(c10::ScalarType t) {
  if (!reducible(t)) return ValueKind::kNoStats;
  if (t == c10::ScalarType::Bool) return ValueKind::kBoolean;
  if (c10::isComplexType(t)) return ValueKind::kNoStats;
  if (c10::isIntegralType(t, /*includeBool=*/false)) return ValueKind::kIntegral;
  if (c10::isFloatingType(t)) return ValueKind::kFloating;
  return ValueKind::kNoStats;
}

// Calls f(static_cast<const T*>(nullptr)) with T the element type of `t`.
// `caller` names the kernel in the error for a type that is not reducible
// (callers check reducible() first; reaching the error is a bug).
template <class F>
void dispatch_reducible(c10::ScalarType t, const char* caller, F&& f) {
  switch (t) {
#define GRAPHPROBE_REDUCIBLE_CASE(ctype, name) \
  case c10::ScalarType::name:                  \
    f(static_cast<const ctype*>(nullptr));     \
    return;
    GRAPHPROBE_FORALL_REDUCIBLE_TYPES(GRAPHPROBE_REDUCIBLE_CASE)
#undef GRAPHPROBE_REDUCIBLE_CASE
    default:
      TORCH_CHECK(false, caller, ": no statistics kernel for ", t);
  }
}

}  // namespace graphprobe::stats
