#pragma once
// An optional double in 8 bytes (std::optional<double> takes 16): "absent"
// is a signalling-NaN bit pattern that neither parsing nor arithmetic ever
// produces. Holding every statistic and metric of a compare this way cuts
// its memory by a fifth. Reads like std::optional<double>. Torch-free.

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

namespace graphprobe::compare {

class OptDouble {
 public:
  constexpr OptDouble() = default;
  constexpr OptDouble(std::nullopt_t) {}  // NOLINT(google-explicit-constructor): reads like std::optional
  OptDouble(double v) { *this = v; }      // NOLINT(google-explicit-constructor)
  OptDouble(const std::optional<double>& v) {  // NOLINT(google-explicit-constructor)
    if (v) *this = *v;
  }

  OptDouble& operator=(double v) {
    std::memcpy(&bits_, &v, sizeof v);
    // A NaN that happens to carry the marker's payload stays a NaN.
    if (bits_ == kAbsent) bits_ = kQuietNan;
    return *this;
  }
  OptDouble& operator=(std::nullopt_t) {
    bits_ = kAbsent;
    return *this;
  }

  bool has_value() const { return bits_ != kAbsent; }
  explicit operator bool() const { return has_value(); }
  double operator*() const {
    double v;
    std::memcpy(&v, &bits_, sizeof v);
    return v;
  }
  operator std::optional<double>() const {  // NOLINT(google-explicit-constructor)
    if (!has_value()) return std::nullopt;
    return **this;
  }

 private:
  static constexpr uint64_t kAbsent = 0x7ff4'0000'dead'beefULL;  // signalling NaN, payload 0x40000deadbeef
  static constexpr uint64_t kQuietNan = 0x7ff8'0000'0000'0000ULL;
  uint64_t bits_ = kAbsent;
};

static_assert(sizeof(OptDouble) == 8);

}  // namespace graphprobe::compare
