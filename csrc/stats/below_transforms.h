#pragma once
// A scope for the few ATen calls a probe's CPU kernel makes on its tensor
// (a contiguous copy, a dtype conversion): the kernel holds a plain tensor,
// but a functorch transform (grad, vmap, jacrev) or a Python mode active
// around the model keeps its dispatch keys in thread-local state, so such a
// call would wrap its result again, and a wrapper has no data pointer.

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace graphprobe::stats {

class BelowTransforms {
 public:
  BelowTransforms()
      : exclude_(c10::DispatchKeySet({c10::DispatchKey::FuncTorchDynamicLayerFrontMode,
                                      c10::DispatchKey::FuncTorchDynamicLayerBackMode, c10::DispatchKey::Python,
                                      c10::DispatchKey::PythonTLSSnapshot})) {}

 private:
  c10::impl::ExcludeDispatchKeyGuard exclude_;
  at::AutoDispatchBelowADInplaceOrView below_autograd_;
};

}  // namespace graphprobe::stats
