#pragma once
// A function-local static that is constructed on first use and never
// destroyed.
//
// Objects that CUDA host callbacks reach (the writer, the payloads of captured
// save points) must stay valid until the process is gone: a graph may replay,
// and a driver thread may run its callback, while static destructors run at
// exit. The object lives in static storage (placement new), so there is no
// heap allocation to leak or free; its destructor simply never runs.

#include <new>
#include <utility>

namespace graphprobe {

template <class T>
class Immortal {
 public:
  template <class... Args>
  explicit Immortal(Args&&... args) {
    ::new (static_cast<void*>(storage_)) T(std::forward<Args>(args)...);
  }
  Immortal(const Immortal&) = delete;
  Immortal& operator=(const Immortal&) = delete;
  T& get() { return *std::launder(reinterpret_cast<T*>(storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace graphprobe
