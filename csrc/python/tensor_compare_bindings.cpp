// graphprobe._C.msprobe_real_data (msprobe's real-data cells, the default
// tensor layout) and graphprobe._C.tensor_metrics (graphprobe's layout): the
// real-data metrics of two dumped tensor files, for `graphprobe compare` on
// tensor dumps. Called only when a tensor dump is compared; the statistics
// compare never imports _C.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <c10/util/Exception.h>

#include "compare_tensors/msprobe_real_data.h"
#include "compare_tensors/tensor_metrics.h"
#include "python/bindings.h"

namespace py = pybind11;
namespace gct = graphprobe::compare_tensors;

namespace graphprobe::python {
namespace {

// Any other failure of torch while one pair is compared (a dtype an ATen
// call does not take, say) becomes TensorNotComparableError naming both
// files, so that compare reports the row (not compared, a warning) instead of
// raising out of it.
template <typename F>
auto guarded(const std::string& target_file, const std::string& bench_file, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    throw gct::TensorNotComparableError("cannot compare tensor files '" + target_file + "' and '" + bench_file +
                                   "': " + e.what_without_backtrace());
  }
}

}  // namespace

void bind_tensor_compare(py::module_& m) {
  py::register_exception<gct::TensorFileError>(m, "TensorFileError", PyExc_OSError);
  auto mismatch = py::register_exception<gct::TensorMismatchError>(m, "TensorMismatchError", PyExc_ValueError);
  // Registered after its base, so that pybind11 tries it first.
  py::register_exception<gct::TensorNotComparableError>(m, "TensorNotComparableError", mismatch.ptr());
  m.def(
      "tensor_metrics",
      [](const std::string& target_file, const std::string& bench_file) {
        gct::TensorMetrics r;
        {
          py::gil_scoped_release release;
          r = guarded(target_file, bench_file, [&] { return gct::compare_tensor_files(target_file, bench_file); });
        }
        py::dict d;
        d["cosine"] = r.cosine;
        d["euc_dist"] = r.euc_dist;
        d["max_abs_err"] = r.max_abs_err;
        d["max_rel_err"] = r.max_rel_err;
        d["one_thousandth_err_ratio"] = r.one_thousandth_err_ratio;
        d["five_thousandths_err_ratio"] = r.five_thousandths_err_ratio;
        d["notes"] = r.notes;
        return d;
      },
      py::arg("target_file"), py::arg("bench_file"),
      "Cosine, EucDist, MaxAbsErr, MaxRelativeErr (a ratio), One Thousandth and Five Thousandths Err Ratio of "
      "two torch.save tensor files, plus notes on undefined values; keys cosine, euc_dist, max_abs_err, "
      "max_rel_err, one_thousandth_err_ratio, five_thousandths_err_ratio, notes. Values are None for empty "
      "tensors. Raises TensorFileError (an OSError) when a file cannot be read as one tensor and "
      "TensorMismatchError (a ValueError) when dtype or shape differ.");
  m.def(
      "msprobe_real_data",
      [](const std::string& target_file, const std::string& bench_file) {
        gct::RealDataMetrics r;
        {
          py::gil_scoped_release release;
          r = guarded(target_file, bench_file, [&] { return gct::msprobe_real_data_files(target_file, bench_file); });
        }
        py::list cells;
        for (const auto& c : r.cells) {
          if (!c.token.empty()) cells.append(py::str(c.token));
          else if (c.value) cells.append(py::float_(*c.value));
          else cells.append(py::none());
        }
        py::dict d;
        d["cells"] = cells;
        d["notes"] = r.notes;
        return d;
      },
      py::arg("target_file"), py::arg("bench_file"),
      "msprobe's real-data cells of two torch.save tensor files: {'cells': six floats or msprobe's words "
      "('unsupported', 'shape unmatched', 'N/A', 'Nan') in the order Cosine, EucDist, MaxAbsErr, MaxRelativeErr, "
      "One Thousandth Err Ratio, Five Thousandths Err Ratio; 'notes': why a cell is a word}. Raises "
      "TensorFileError (an OSError) when a file cannot be read as one tensor and TensorNotComparableError "
      "(a TensorMismatchError, a ValueError) for a dtype the metrics are not defined for (complex, "
      "float4_e2m1fn_x2, bits).");
}

}  // namespace graphprobe::python
