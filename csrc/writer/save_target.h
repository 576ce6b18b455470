#pragma once
// Where one save goes, shared by acl_save and the tensor task's staged saves.

#include <ATen/core/Tensor.h>

#include <atomic>
#include <string>

namespace graphprobe::writer {

struct SaveTarget {
  std::string path;
  // acl_save: each execution writes {stem}_{n}{suffix}, n taken when the
  // data is taken. Staged tensor-task saves overwrite `path` itself.
  bool numbered = true;
  // When set, a save replayed from a captured graph is skipped while the
  // flag is false (the dumper's live switch; read on the host callback's
  // thread). Non-captured saves are gated by their caller.
  const std::atomic<bool>* gate = nullptr;
};

// Saves x to `target`: a host copy on CPU; an asynchronous pinned copy on
// eager CUDA; a captured copy plus host callback under CUDA graph capture.
void save_tensor(const at::Tensor& x, const SaveTarget& target);

// The CUDA half of save_tensor (save_cuda.cpp; without CUDA it reports that
// graphprobe was built without it).
void save_tensor_cuda(const at::Tensor& x, const SaveTarget& target);

}  // namespace graphprobe::writer
