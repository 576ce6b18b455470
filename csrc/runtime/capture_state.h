#pragma once
// Capture state as the engine asks for it, answered by the device runtimes
// (capture_state.cpp).

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace graphprobe {

// Whether the current stream of `x`'s device is being captured into a graph.
bool is_capturing(const at::Tensor& x);

// The id of the graph capture under way on the current CUDA stream, 0 when
// none (always 0 without CUDA).
uint64_t current_capture_id();

}  // namespace graphprobe
