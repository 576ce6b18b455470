#include "python/bindings.h"

namespace graphprobe::python {

// The asynchronous writer (acl_save) binds its controls here.
void bind_writer(pybind11::module_&) {}

}  // namespace graphprobe::python
