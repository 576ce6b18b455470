// The checksum compare of a CompareResult (compare/checksums.h): counts, the
// first bit-different tensor and checksum_result_*.csv from the records the
// engine's one read kept; graphprobe.compare.checksums is its Python face.
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compare/checksums.h"
#include "compare/dump_reader.h"
#include "python/compare/bindings.h"

namespace graphprobe::compare::python {
namespace {

// One pair's checksum comparison; keeps its result (and so the records) alive.
struct ChecksumView {
  ResultPtr result;
  ChecksumComparison comparison;

  const ChecksumRecords& target() const { return result->target.checksums; }
  const ChecksumRecords& bench() const { return result->bench.checksums; }
  const ChecksumRecord* first() const {
    if (!comparison.first_different) return nullptr;
    return &target().records[static_cast<size_t>(comparison.rows[*comparison.first_different].target)];
  }
};

py::object shape_object(const ChecksumRecord& r) {
  if (r.shape_kind == ChecksumRecord::Shape::kNone) return py::none();
  if (r.shape_kind == ChecksumRecord::Shape::kInts) return py::tuple(py::cast(r.shape));
  return py::str(r.shape_text.str());  // a list of something else, as Python prints it
}

py::object text_or_none(const std::string* s) { return s ? py::object(py::str(*s)) : py::object(py::none()); }

}  // namespace

void bind_checksums(py::module_& m) {
  py::class_<ChecksumView>(m, "ChecksumComparison",
                           "The checksum compare of one pair (both dumps carry \"md5\"); see "
                           "graphprobe.compare.checksums.")
      .def_property_readonly("counts",
                             [](const ChecksumView& v) {
                               py::dict d;
                               for (int r = 0; r < 4; ++r)
                                 d[checksum_result_name(static_cast<ChecksumResult>(r))] = v.comparison.counts[r];
                               return d;
                             },
                             "Rows per result: bit-identical, bit-different, no checksum, unpaired.")
      .def_property_readonly("first_different",
                             [](const ChecksumView& v) -> std::optional<std::string> {
                               if (const ChecksumRecord* r = v.first()) return r->name;
                               return std::nullopt;
                             },
                             "Name of the first bit-different tensor in the target's order, or None.")
      .def_property_readonly("first_different_entry",
                             [](const ChecksumView& v) -> std::optional<std::string> {
                               if (const ChecksumRecord* r = v.first()) return v.target().entries[r->entry];
                               return std::nullopt;
                             },
                             "Its entry, or None.")
      .def("__len__", [](const ChecksumView& v) { return v.comparison.rows.size(); })
      .def(
          "rows",
          [](const ChecksumView& v) {
            py::list out;
            for (const ChecksumRow& row : v.comparison.rows) {
              const ChecksumRecord* t = row.target >= 0 ? &v.target().records[static_cast<size_t>(row.target)] : nullptr;
              const ChecksumRecord* b = row.bench >= 0 ? &v.bench().records[static_cast<size_t>(row.bench)] : nullptr;
              const ChecksumRecords& side = t ? v.target() : v.bench();
              const ChecksumRecord& any = t ? *t : *b;
              auto md5 = [](const ChecksumRecord* r) -> py::object {
                if (!r || r->md5 == ChecksumRecord::Md5::kNone) return py::none();
                return py::str(md5_text(*r));
              };
              auto dtype = [](const ChecksumRecords& s, const ChecksumRecord* r) -> py::object {
                if (!r || r->dtype == ChecksumRecord::kNoDtype) return py::none();
                return py::str(s.dtypes[r->dtype]);
              };
              out.append(py::make_tuple(any.name, side.entries[any.entry], md5(t), md5(b), dtype(v.target(), t),
                                        dtype(v.bench(), b), t ? shape_object(*t) : py::none(),
                                        b ? shape_object(*b) : py::none(), checksum_result_name(row.result)));
            }
            return out;
          },
          "Every row: (name, entry, target md5, bench md5, target dtype, bench dtype, target shape, bench shape, "
          "result); None where a side has no record or no value; a shape is a tuple of ints (or, for a list of "
          "something else, its Python repr).")
      .def("write_csv",
           [](const ChecksumView& v, const std::string& path) {
             write_checksum_csv(v.target(), v.bench(), v.comparison, path);
           },
           py::arg("path"), py::call_guard<py::gil_scoped_release>(),
           "Writes checksum_result_*.csv atomically: one row per tensor, as Python's csv module writes it.")
      .def("render_csv", [](const ChecksumView& v) {
        return render_checksum_csv(v.target(), v.bench(), v.comparison);
      });

  m.def(
      "checksum_digits",
      [](const CompareResult& r) -> std::optional<std::pair<std::vector<size_t>, std::vector<size_t>>> {
        if (!r.target.checksums.carried || !r.bench.checksums.carried) return std::nullopt;
        return std::make_pair(r.target.checksums.digits, r.bench.checksums.digits);
      },
      py::arg("result"),
      "None unless both dumps carry checksums (a tensor record with \"md5\"); else the lengths of their md5 "
      "texts, (target's, bench's), each sorted: 16 for graphprobe's checksum, 8 for msprobe's CRC-32.");
  m.def(
      "compare_checksums",
      [](const std::shared_ptr<CompareResult>& r) -> std::optional<ChecksumView> {
        if (!r->target.checksums.carried || !r->bench.checksums.carried) return std::nullopt;
        py::gil_scoped_release release;
        ChecksumView v{r, compare_checksums(r->target.checksums, r->bench.checksums)};
        return v;
      },
      py::arg("result"),
      "The checksum compare of a result's two dumps, from the records its read kept; None unless both carry "
      "checksums. Check checksum_digits first: digits that differ are not comparable.");
  m.def(
      "dump_has_checksums",
      [](const std::string& path) { return read_dump(path).checksums.carried; }, py::arg("path"),
      py::call_guard<py::gil_scoped_release>(), "Whether a dump.json's tensor records hold \"md5\".");
}

}  // namespace graphprobe::compare::python
