#include <ATen/core/dispatch/Dispatcher.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <sys/stat.h>

#include "engine/engine.h"
#include "engine/step_output.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace graphprobe::python {
namespace {

// A non-tensor value as Python passes it: (place, order, type name, value);
// value None with a type other than NoneType means "type only".
Leaf to_leaf(const py::tuple& t) {
  TORCH_CHECK(t.size() == 4, "graphprobe: a leaf is (place, order, type, value), got ", t.size(), " fields");
  Leaf leaf;
  leaf.place = t[0].cast<Place>();
  leaf.order = t[1].cast<int64_t>();
  leaf.type = t[2].cast<std::string>();
  const py::handle v = t[3];
  if (v.is_none()) {
    leaf.kind = leaf.type == "NoneType" ? Leaf::Kind::kNone : Leaf::Kind::kOpaque;
  } else if (PyBool_Check(v.ptr())) {
    leaf.kind = Leaf::Kind::kBool;
    leaf.b = v.ptr() == Py_True;
  } else if (PyLong_Check(v.ptr())) {
    leaf.kind = Leaf::Kind::kInt;
    // int's own repr: the digits, also for int subclasses (IntEnum prints a name).
    leaf.text = py::reinterpret_steal<py::str>(PyLong_Type.tp_repr(v.ptr())).cast<std::string>();
  } else if (PyFloat_Check(v.ptr())) {
    leaf.kind = Leaf::Kind::kFloat;
    leaf.f = PyFloat_AsDouble(v.ptr());
  } else if (PyUnicode_Check(v.ptr())) {
    leaf.kind = Leaf::Kind::kStr;
    leaf.text = v.cast<std::string>();
  }
  return leaf;
}

PartLayout to_layout(std::string entry, std::vector<Place> places, std::vector<int64_t> order,
                     std::vector<bool> requires_grad, const py::tuple& leaves,
                     std::vector<std::vector<std::pair<std::string, std::string>>> extras) {
  TORCH_CHECK(order.size() == places.size() && requires_grad.size() == places.size(),
              "graphprobe: a call part needs one order and one requires_grad per tensor place (", places.size(),
              " places, ", order.size(), " orders, ", requires_grad.size(), " flags)");
  PartLayout layout;
  layout.entry = std::move(entry);
  layout.places = std::move(places);
  layout.place_order = std::move(order);
  layout.requires_grad = std::move(requires_grad);
  for (const py::handle& l : leaves) layout.leaves.push_back(to_leaf(py::reinterpret_borrow<py::tuple>(l)));
  TORCH_CHECK(extras.size() <= layout.places.size(), "graphprobe: a call part has ", extras.size(),
              " extra descriptions for ", layout.places.size(), " tensor places");
  layout.extras = std::move(extras);
  return layout;
}

InsertMode to_mode(int mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "graphprobe: insert mode must be 0 (eager), 1 (traced) or 2 (captured), got ",
              mode);
  return static_cast<InsertMode>(mode);
}

}  // namespace

void bind_engine(py::module_& m) {
  for (const bool opening : {true, false}) {
    m.def(
        opening ? "open_call" : "close_call",
        [opening](std::string entry, std::vector<Place> places, std::vector<int64_t> order,
                  std::vector<bool> requires_grad, const py::tuple& leaves, int mode, int64_t program,
                  std::vector<std::vector<std::pair<std::string, std::string>>> extras, int64_t forward_site) {
          PartLayout layout = to_layout(std::move(entry), std::move(places), std::move(order),
                                        std::move(requires_grad), leaves, std::move(extras));
          layout.forward_site = forward_site;  // a backward call's forward call (call_registry.h)
          Engine& e = Engine::get();
          return opening ? e.open_call(std::move(layout), to_mode(mode), program)
                         : e.close_call(std::move(layout), to_mode(mode), program);
        },
        py::arg("entry"), py::arg("places"), py::arg("order"), py::arg("requires_grad"), py::arg("leaves"),
        py::arg("mode"), py::arg("program"),
        py::arg("extras") = std::vector<std::vector<std::pair<std::string, std::string>>>{},
        py::arg("forward_site") = int64_t{-1},
        opening ? "Registers the input part of a new call; returns the site its probes carry."
                : "Registers the output part of the latest open call of `entry`; returns its site.");
  }
  m.def(
      "record_part",
      [](int64_t site, const std::vector<at::Tensor>& tensors) {
        // Eager mode has no graph to keep the op in: plain tensors go
        // straight to the engine, saving a dispatcher round trip per tensor.
        // Tensors that need the dispatcher (fake, meta, subclasses, functorch
        // wrappers) still take the op, whose kernels handle them.
        static const auto op = c10::Dispatcher::singleton()
                                   .findSchemaOrThrow("graphprobe::record_stats", "")
                                   .typed<void(const at::Tensor&, int64_t, int64_t)>();
        // Functionality keys only: has_any() must not mix them with backend
        // (runtime) keys such as Meta; meta tensors are neither CPU nor CUDA.
        constexpr c10::DispatchKeySet needs_dispatch = c10::DispatchKeySet({
            c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot, c10::DispatchKey::FuncTorchBatched,
            c10::DispatchKey::FuncTorchGradWrapper, c10::DispatchKey::Functionalize});
        for (size_t i = 0; i < tensors.size(); ++i) {
          const at::Tensor& t = tensors[i];
          const bool plain = (t.is_cpu() || t.is_cuda()) && !t.key_set().has_any(needs_dispatch);
          if (plain) Engine::get().record(t, site, static_cast<int64_t>(i));
          else op.call(t, site, static_cast<int64_t>(i));
        }
      },
      py::arg("site"), py::arg("tensors"),
      "Records the tensors of one eager call part (index = position in the list).");
  m.def("new_program", [] { return Engine::get().new_program(); },
        "A new program number (one per dynamo trace): calls inserted in it keep their insertion order.");
  m.def(
      "finish_step",
      [](std::optional<std::string> out_dir, const std::string& task, const std::string& level,
         bool write_if_empty) {
        StepReport r;
        {
          py::gil_scoped_release nogil;  // device synchronisation can take a while
          r = finish_step_and_write(out_dir, task, level, write_if_empty);
        }
        py::dict summary;
        summary["dropped"] = r.dropped;
        summary["written"] = r.written;
        summary["write_seq"] = r.write_seq;
        summary["records"] = r.records;
        summary["overwritten"] = r.overwritten;
        return summary;
      },
      py::arg("out_dir"), py::arg("task"), py::arg("level"), py::arg("write_if_empty") = true,
      "Ends the current step: collects the rows written in it and starts the next one; the writer thread then "
      "writes out_dir/dump.json (unless out_dir is None, or nothing was recorded and write_if_empty is false). "
      "Returns at once with write_seq, the writer job to wait for (writer_wait); its failures are reported by "
      "writer_take_errors.");
  m.def(
      "step_end",
      [](const std::optional<std::string>& out_dir, const std::string& task, const std::string& level,
         bool write_if_empty, const std::optional<std::string>& stat_path) {
        StepReport r;
        std::optional<int64_t> mtime_ns;
        {
          py::gil_scoped_release nogil;
          r = finish_step_and_write(out_dir, task, level, write_if_empty);
          // The config file's mtime for the live switch (dump_enable), read
          // here rather than by os.stat: one call less on the caller's
          // thread, and no stat_result object (issue 39).
          struct stat st {};
          if (stat_path && ::stat(stat_path->c_str(), &st) == 0)
            mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
        }
        // A tuple, not finish_step's dict: fewer objects made per step.
        py::object overwritten = py::none();
        if (!r.overwritten.empty()) overwritten = py::cast(r.overwritten);
        return py::make_tuple(r.write_seq, r.written, r.records, r.dropped, overwritten,
                              mtime_ns ? py::object(py::int_(*mtime_ns)) : py::object(py::none()));
      },
      py::arg("out_dir"), py::arg("task"), py::arg("level"), py::arg("write_if_empty"), py::arg("stat_path"),
      "finish_step for AclGraphDumper.step(), then the mtime of stat_path in nanoseconds (os.stat's "
      "st_mtime_ns; None when stat_path is None or cannot be read). Returns (write_seq, written, records, "
      "dropped, overwritten or None, mtime_ns).");
  m.def(
      "pending_records",
      [] {
        py::gil_scoped_release nogil;  // device synchronisation can take a while
        return Engine::get().pending_records();
      },
      "The tensor rows recorded since the last finish_step, counted without ending the step.");
  m.def("set_active", [](bool active) { Engine::get().set_active(active); });
  m.def("set_enabled", [](bool enabled) { Engine::get().set_enabled(enabled); });
  m.def(
      "set_tensor_staging", [](std::optional<std::string> dir) { Engine::get().set_tensor_staging(std::move(dir)); },
      py::arg("dir"), "Tensor task: stage every recorded tensor in `dir` (None: statistics only).");
  m.def("tensor_staging", [] { return Engine::get().tensor_staging(); },
        "The tensor task's staging folder, None while recording statistics only.");
  m.def("set_checksums", [](bool on) { Engine::get().set_checksums(on); }, py::arg("on"),
        "summary_mode \"md5\": probes also hash their tensors' bits (docs/formats.md).");
  m.def("checksums", [] { return Engine::get().checksums(); }, "Whether probes hash their tensors' bits.");
  m.def("set_sketches", [](bool on) { Engine::get().set_sketches(on); }, py::arg("on"),
        "statistics.sketch: probes also compute the Sketch statistic (docs/formats.md).");
  m.def("reset", [] { Engine::get().reset(); });
}

}  // namespace graphprobe::python
