#pragma once
// A string that is empty for almost every record, in 8 bytes instead of
// std::string's 32: a dump.json record's shape_text, text and data_name are
// set only for non-tensor values and tensor dumps, and a compare holds
// millions of records, so they set its peak memory. Reads as a const std::string.
// Torch-free.

#include <memory>
#include <string>
#include <string_view>

namespace graphprobe::compare {

class RareString {
 public:
  RareString() = default;
  explicit RareString(std::string s) { *this = std::move(s); }
  RareString(const RareString& o) : p_(o.p_ ? std::make_unique<std::string>(*o.p_) : nullptr) {}
  RareString(RareString&&) noexcept = default;
  RareString& operator=(const RareString& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<std::string>(*o.p_) : nullptr;
    return *this;
  }
  RareString& operator=(RareString&&) noexcept = default;
  RareString& operator=(std::string s) {
    if (s.empty()) p_.reset();
    else p_ = std::make_unique<std::string>(std::move(s));
    return *this;
  }
  RareString& operator=(const char* s) { return *this = std::string(s); }

  bool empty() const { return !p_; }
  const std::string& str() const {
    static const std::string kEmpty;
    return p_ ? *p_ : kEmpty;
  }
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor): reads as a string
  operator std::string_view() const { return str(); }     // NOLINT(google-explicit-constructor)

 private:
  std::unique_ptr<std::string> p_;
};

inline bool operator==(const RareString& a, std::string_view b) { return std::string_view(a.str()) == b; }
inline bool operator!=(const RareString& a, std::string_view b) { return !(a == b); }

static_assert(sizeof(RareString) == 8);

}  // namespace graphprobe::compare
