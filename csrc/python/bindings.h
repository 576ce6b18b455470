#pragma once
// Each part of the engine exposes its Python functions through one binder,
// called from module.cpp.

#include <pybind11/pybind11.h>

namespace graphprobe::python {

void bind_engine(pybind11::module_& m);
void bind_writer(pybind11::module_& m);
void bind_tensor_compare(pybind11::module_& m);
void bind_runtime(pybind11::module_& m);
void bind_version_watch(pybind11::module_& m);

}  // namespace graphprobe::python
