#pragma once
// A value that almost every row leaves at its default, held on the heap only
// when set: 8 bytes in the row instead of sizeof(T). A compare holds a
// CompareRow per tensor (300k+ for a 100 MB dump), so a field only tensor
// dumps fill (TensorMetrics, 88 bytes) set a fifth of the rows' memory.
// Reads as a const T (the default when unset); mut() makes it. Copies copy
// the value. Torch-free.

#include <memory>

namespace graphprobe::compare {

template <class T>
class RareValue {
 public:
  RareValue() = default;
  RareValue(const RareValue& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  RareValue(RareValue&&) noexcept = default;
  RareValue& operator=(const RareValue& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  RareValue& operator=(RareValue&&) noexcept = default;

  bool empty() const { return !p_; }
  const T& get() const {
    static const T kDefault{};
    return p_ ? *p_ : kDefault;
  }
  const T& operator*() const { return get(); }
  const T* operator->() const { return &get(); }
  // The value to write into, made (as T{}) on first use.
  T& mut() {
    if (!p_) p_ = std::make_unique<T>();
    return *p_;
  }

 private:
  std::unique_ptr<T> p_;
};

}  // namespace graphprobe::compare
