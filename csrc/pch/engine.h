// Precompiled header of graphprobe._C (setup.py, PCH_HEADERS): the torch
// headers that most of the engine's files include (ATen/core/Tensor.h is
// about 2.5 s of CPU per file), parsed once per build instead of once per
// file. setup.py compiles it with exactly the flags of the module's files and
// passes it with -include, so no source includes it; a file still includes
// what it uses (the CUDA, NPU and C++ unit-test builds compile without it).
// Only third-party and standard headers here: a change to one of
// graphprobe's own headers must not rebuild the whole module.
//
// Measured (g++ 12, 2026-12-02): pybind11 does not belong here. A PCH with
// pybind11/pybind11.h and stl.h cost a file that does not use them 6 s of
// CPU more (json_writer.cpp: 1.1 -> 7.1 s), torch/library.h 1.3 s more;
// this set costs such a file nothing measurable.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

// GCC 12 does not keep `#pragma GCC diagnostic` state in a PCH (GCC PR
// 64117), so a template that c10 instantiates under "ignored -Wsign-compare"
// (TypeSafeSignMath.h) would warn in every file that uses this header.
// Instantiated here, while the pragma holds, it is not instantiated again.
static_assert(!c10::greater_than_max<unsigned long>(0L));
