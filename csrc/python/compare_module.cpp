// graphprobe._compare: the torch-free compare engine.
#include <pybind11/pybind11.h>

PYBIND11_MODULE(_compare, m) { m.doc() = "graphprobe compare engine"; }
