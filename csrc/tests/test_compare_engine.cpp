// The compare engine on in-memory dump.json texts: row flattening, metrics,
// verdict rules, matching, first divergence, CSV. Expected values are worked
// out by hand in the comments.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "compare/csv_writer.h"
#include "compare/engine.h"
#include "compare/matching.h"
#include "compare/metrics.h"
#include "compare/msprobe_values.h"
#include "fs/atomic_file.h"
#include "tests/check.h"

namespace gc = graphprobe::compare;

namespace {

std::string tensor(double norm, const std::string& max = "1.0", const std::string& dtype = "torch.float32") {
  return R"({"type": "torch.Tensor", "dtype": ")" + dtype + R"(", "shape": [2, 3], "Max": )" + max +
         R"(, "Min": -1.0, "Mean": 0.0, "Norm": )" + gc::format_number(norm) + R"(, "requires_grad": false})";
}

std::string doc(const std::string& entries) { return R"({"task": "statistics", "data": {)" + entries + "}}"; }

std::string entry(const std::string& name, const std::string& in, const std::string& out) {
  return "\"" + name + R"(": {"input_args": [)" + in + R"(], "input_kwargs": {}, "output": [)" + out + "]}";
}

gc::CompareResult run(const std::string& t, const std::string& b, gc::CompareOptions o = {}) {
  return gc::compare_dumps(gc::parse_dump(t, "t.json"), gc::parse_dump(b, "b.json"), o);
}

gc::TensorRecord stat(double v, gc::ValueKind k = gc::ValueKind::kFloat) {
  gc::TensorRecord r;
  for (int s = 0; s < gc::kNumStats; ++s) {
    r.stats[s] = v;
    r.kinds[s] = k;
  }
  return r;
}

void python_float_repr() {
  // What Python's repr(float) prints, checked by hand in a Python shell.
  CHECK_EQ(gc::python_float_repr(1.0), std::string("1.0"));
  CHECK_EQ(gc::python_float_repr(0.1), std::string("0.1"));
  CHECK_EQ(gc::python_float_repr(123.456), std::string("123.456"));
  CHECK_EQ(gc::python_float_repr(0.0001), std::string("0.0001"));
  CHECK_EQ(gc::python_float_repr(1e-05), std::string("1e-05"));
  CHECK_EQ(gc::python_float_repr(2.5e-7), std::string("2.5e-07"));
  CHECK_EQ(gc::python_float_repr(1e15), std::string("1000000000000000.0"));
  CHECK_EQ(gc::python_float_repr(1e16), std::string("1e+16"));
  CHECK_EQ(gc::python_float_repr(1.5e16), std::string("1.5e+16"));
  CHECK_EQ(gc::python_float_repr(1e100), std::string("1e+100"));
  CHECK_EQ(gc::python_float_repr(-0.0), std::string("-0.0"));
  CHECK_EQ(gc::python_float_repr(NAN), std::string("nan"));
  CHECK_EQ(gc::python_float_repr(-INFINITY), std::string("-inf"));
}

void msprobe_cells() {
  // 3 vs 2: diff 1, 50 %; as msprobe computes |(t - b) / b * 100|.
  gc::Metrics m = gc::compute_metrics(stat(3.0), stat(2.0));
  CHECK(m.kind[gc::kMax] == gc::StatDiff::kNumbers);
  CHECK_EQ(*m.diff[gc::kMax], 1.0);
  CHECK_EQ(*m.rel_pct[gc::kMax], 50.0);
  CHECK_EQ(gc::rel_cell(m, gc::kMax), std::string("50%"));
  // Equal prints: "0"; NaN and NaN print the same ("Nan").
  CHECK_EQ(gc::diff_cell(gc::compute_metrics(stat(NAN), stat(NAN)), gc::kMax), std::string("0"));
  // 1 vs 1.0 print differently: numbers, 0 %; 0 vs 0.0: a bench of 0, "inf".
  m = gc::compute_metrics(stat(1.0, gc::ValueKind::kInt), stat(1.0));
  CHECK(m.kind[gc::kMax] == gc::StatDiff::kNumbers && *m.rel_pct[gc::kMax] == 0.0);
  m = gc::compute_metrics(stat(0.0, gc::ValueKind::kInt), stat(0.0));
  CHECK_EQ(gc::diff_cell(m, gc::kMax), std::string("0"));
  CHECK_EQ(gc::rel_cell(m, gc::kMax), std::string("inf"));
  // Non-numbers: NaN vs a number "Nan"; a number vs inf "-inf"; None vs a number "Diff".
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(stat(NAN), stat(1.0)), gc::kMax), std::string("Nan"));
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(stat(1.0), stat(INFINITY)), gc::kMax), std::string("-inf"));
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(stat(INFINITY), stat(1.0)), gc::kMax), std::string("inf"));
  gc::TensorRecord none;
  m = gc::compute_metrics(none, stat(1.0));
  CHECK_EQ(gc::rel_cell(m, gc::kMax), std::string("Diff"));
  CHECK(!m.rel_pct[gc::kMax]);
  // Text: devices against each other are "N/A"; text that reads as a number is one.
  gc::TensorRecord cpu = stat(0, gc::ValueKind::kText), cuda = cpu, num = cpu;
  cpu.text = "cpu";
  cuda.text = "cuda:0";
  num.text = "2.5";
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(cpu, cuda), gc::kMax), std::string("N/A"));
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(num, stat(2.0)), gc::kMax), std::string("25%"));
  CHECK_EQ(gc::stat_str(stat(1.0, gc::ValueKind::kBool), gc::kMax), std::string("True"));
}

void flattening() {
  const std::string t = doc(R"("Module.a.M.forward.0": {"input_args": [{"type": "int", "value": 1}, [)" + tensor(1) +
                            ", null, " + tensor(1) + R"(]], "input_kwargs": {"k": )" + tensor(1) +
                            R"(}, "output": )" + tensor(1) + "}");
  gc::Dump d = gc::parse_dump(t, "t.json");
  CHECK_EQ(d.entries.size(), size_t{1});
  CHECK_EQ(d.rows.size(), size_t{6});
  // Every leaf is a row, as in msprobe: the int, the null, the tensors.
  CHECK_EQ(d.rows[0].name, std::string("Module.a.M.forward.0.input.0"));
  CHECK_EQ(d.rows[0].dtype, std::string("<class 'int'>"));
  CHECK(d.rows[0].kinds[gc::kNorm] == gc::ValueKind::kInt && *d.rows[0].stats[gc::kNorm] == 1.0);
  CHECK_EQ(d.rows[1].name, std::string("Module.a.M.forward.0.input.1.0"));
  CHECK_EQ(d.rows[2].name, std::string("Module.a.M.forward.0.input.1.1"));
  CHECK_EQ(gc::shape_of(d.rows[2]), std::string("N/A"));
  CHECK_EQ(d.rows[3].name, std::string("Module.a.M.forward.0.input.1.2"));
  CHECK_EQ(d.rows[4].name, std::string("Module.a.M.forward.0.input.k"));
  // A bare record where the output list is expected: named as msprobe names it.
  CHECK_EQ(d.rows[5].name, std::string("Module.a.M.forward.0.output"));
  CHECK(d.rows[5].role == gc::Role::kOutput);
  CHECK_EQ(std::string(d.rows[5].suffix(d.entries)), std::string("output"));
  CHECK_EQ(d.rows[1].shape.size(), size_t{2});

  // parameters before outputs; a parameters_grad entry without list positions.
  const std::string m = doc(R"("Module.fc.L.forward.0": {"input_args": [], "output": [)" + tensor(1) +
                            R"(], "parameters": {"weight": )" + tensor(2) +
                            R"(}}, "Module.fc.L.parameters_grad.0": {"weight": [)" + tensor(3) + "]}");
  d = gc::parse_dump(m, "m.json");
  CHECK_EQ(d.rows.size(), size_t{3});
  CHECK_EQ(d.rows[0].name, std::string("Module.fc.L.forward.0.parameters.weight"));
  CHECK(d.rows[0].role == gc::Role::kInput);
  CHECK_EQ(d.rows[1].name, std::string("Module.fc.L.forward.0.output.0"));
  CHECK_EQ(d.rows[2].name, std::string("Module.fc.L.parameters_grad.0.weight"));
}

void format_errors_name_the_place() {
  CHECK_THROWS(gc::DumpFormatError, gc::parse_dump("[1,", "x.json"), "x.json:1:4: expected a value");
  CHECK_THROWS(gc::DumpFormatError, gc::parse_dump("[]", "x.json"), "x.json: (top level): expected an object");
  CHECK_THROWS(gc::DumpFormatError, gc::parse_dump(R"({"data": []})", "x.json"), "x.json: data: expected an object");
  CHECK_THROWS(gc::DumpFormatError, gc::parse_dump(R"({"data": {"e": 3}})", "x.json"),
               "x.json: data[\"e\"]: expected an object, found a number");
  CHECK_THROWS(gc::DumpFormatError, gc::parse_dump(R"({"data": {"e": {"output": [{"type": "torch.Tensor"}]}}})", "x.json"),
               "data[\"e\"].output[0]: tensor record without \"dtype\"");
  CHECK_THROWS(gc::DumpFormatError,
               gc::parse_dump(R"({"data": {"e": {"input_kwargs": {"m": [5]}}}})", "x.json"),
               "data[\"e\"].input_kwargs[\"m\"][0]: expected a record");
  CHECK_THROWS(gc::DumpFormatError,
               gc::parse_dump(R"({"data": {"e": {"output": [{"type": "torch.Tensor", "dtype": "f", "shape": [1.5]}]}}})",
                              "x.json"),
               "output[0].shape[0]: expected a non-negative integer");
  using IoError = graphprobe::fs::IoError;
  CHECK_THROWS(IoError, gc::read_dump("/nonexistent/dump.json"), "/nonexistent/dump.json");
}

void verdict_rules() {
  // inputs 5 %, output 60 %: error.
  auto r = run(doc(entry("E", tensor(10.5), tensor(16))), doc(entry("E", tensor(10), tensor(10))));
  CHECK(r.rows[0].verdict == gc::Verdict::kPass);
  CHECK(r.rows[1].verdict == gc::Verdict::kError);
  CHECK_NEAR(*r.rows[1].metrics.rel_pct[gc::kNorm], 60.0, 1e-9);
  CHECK_NEAR(*r.rows[1].metrics.diff[gc::kNorm], 6.0, 1e-12);
  CHECK(r.first_divergence && *r.first_divergence == 0u);
  // inputs 2 %, output 30 %: warning.
  r = run(doc(entry("E", tensor(10.2), tensor(13))), doc(entry("E", tensor(10), tensor(10))));
  CHECK(r.rows[1].verdict == gc::Verdict::kWarning);
  // inputs 20 %, output 150 %: pass (150 < 10 x 20, inputs not < 10).
  r = run(doc(entry("E", tensor(12), tensor(25))), doc(entry("E", tensor(10), tensor(10))));
  CHECK(r.rows[1].verdict == gc::Verdict::kPass);
  // NaN target Max: error on the row.
  r = run(doc(entry("E", tensor(10, "NaN"), tensor(10))), doc(entry("E", tensor(10), tensor(10))));
  CHECK(r.rows[0].verdict == gc::Verdict::kError);
  CHECK(std::isnan(*r.rows[0].metrics.diff[gc::kMax]));
  // dtype mismatch.
  r = run(doc(entry("E", tensor(10), tensor(10, "1.0", "torch.bfloat16"))), doc(entry("E", tensor(10), tensor(10))));
  CHECK(r.rows[1].verdict == gc::Verdict::kError);
  CHECK_EQ(r.rows[1].reasons.at(0), std::string("dtype mismatch: torch.bfloat16 vs torch.float32"));
  // Custom threshold: output_error_pct 20 turns 30 % into an error.
  gc::CompareOptions o;
  o.thresholds.output_error_pct = 20;
  r = run(doc(entry("E", tensor(10.2), tensor(13))), doc(entry("E", tensor(10), tensor(10))), o);
  CHECK(r.rows[1].verdict == gc::Verdict::kError);
  CHECK_EQ(r.counts[static_cast<size_t>(gc::Verdict::kError)], int64_t{1});
  o.thresholds.warning_pct = -1;
  CHECK_THROWS(std::invalid_argument, run(doc(""), doc(""), o), "thresholds");
}

void matching_and_unmatched() {
  CHECK_EQ(gc::strip_call_index("Module.fc.Linear.forward.3"), std::string("Module.fc.Linear.forward"));
  CHECK_EQ(gc::strip_call_index("Functional.relu.12.forward"), std::string("Functional.relu.forward"));
  CHECK_EQ(gc::strip_call_index("Module.layers.0.Block.forward.1"), std::string("Module.layers.0.Block.forward"));
  CHECK_EQ(gc::strip_call_index("Tensor.__mul__.0.backward"), std::string("Tensor.__mul__.backward"));
  CHECK_EQ(gc::strip_call_index("no_index"), std::string("no_index"));

  auto r = run(doc(entry("A.forward.0", tensor(1), tensor(1)) + "," + entry("B.forward.0", tensor(1), "")),
               doc(entry("A.forward.0", tensor(1), tensor(1) + "," + tensor(2))));
  CHECK_EQ(r.rows.size(), size_t{4});
  // msprobe's Result for them is pass; graphprobe's verdicts say unmatched.
  CHECK(r.rows[2].match == gc::MatchKind::kTargetOnly && r.rows[2].verdict == gc::Verdict::kPass);
  CHECK(r.rows[3].match == gc::MatchKind::kBenchOnly && r.rows[3].verdict == gc::Verdict::kPass);
  CHECK_EQ(r.counts[static_cast<size_t>(gc::Verdict::kUnmatched)], int64_t{2});
  gc::CompareOptions ours;
  ours.graphprobe_verdicts = true;
  r = run(doc(entry("A.forward.0", tensor(1), tensor(1)) + "," + entry("B.forward.0", tensor(1), "")),
          doc(entry("A.forward.0", tensor(1), tensor(1) + "," + tensor(2))), ours);
  CHECK(r.rows[2].verdict == gc::Verdict::kUnmatched && r.rows[3].verdict == gc::Verdict::kUnmatched);
  CHECK_EQ(r.counts[static_cast<size_t>(gc::Verdict::kPass)], int64_t{2});

  gc::CompareOptions fuzzy;
  fuzzy.fuzzy = true;
  r = run(doc(entry("A.forward.5", tensor(1), tensor(1)) + "," + entry("A.forward.6", tensor(2), tensor(2))),
          doc(entry("A.forward.0", tensor(1), tensor(1)) + "," + entry("A.forward.1", tensor(2), tensor(2))), fuzzy);
  CHECK_EQ(r.counts[static_cast<size_t>(gc::Verdict::kPass)], int64_t{4});
  CHECK_EQ(r.bench.rows[static_cast<size_t>(r.rows[2].bench)].name, std::string("A.forward.1.input.0"));
}

void first_divergence_order() {
  // a exact; b: inputs exact, output 20 % off; c: inputs 20 % off.
  auto make = [](double k) {
    return doc(entry("a", tensor(10), tensor(10)) + "," + entry("b", tensor(10), tensor(10 * k)) + "," +
               entry("c", tensor(10 * k), tensor(20 * k)));
  };
  auto r = run(make(1.2), make(1.0));
  CHECK(r.first_divergence && *r.first_divergence == 1u);
  CHECK(!r.rows[0].first_divergence && r.rows[2].first_divergence && r.rows[3].first_divergence);
  CHECK(!r.rows[4].first_divergence);
  r = run(make(1.0), make(1.0));
  CHECK(!r.first_divergence);
}

void csv_output() {
  CHECK_EQ(gc::csv_field("plain"), std::string("plain"));
  CHECK_EQ(gc::csv_field("a,b"), std::string("\"a,b\""));
  CHECK_EQ(gc::csv_field("say \"hi\""), std::string("\"say \"\"hi\"\"\""));
  CHECK_EQ(gc::csv_field("line\nbreak"), std::string("\"line\nbreak\""));
  CHECK_EQ(gc::csv_field(" padded"), std::string("\" padded\""));
  CHECK_EQ(gc::csv_header().size(), size_t{29});

  auto r = run(doc(entry("E", tensor(10), tensor(15))), doc(entry("E", tensor(10), tensor(0))));
  const std::string text = gc::render_csv(r);
  std::istringstream in(text);
  std::string header, row0, row1;
  std::getline(in, header);
  std::getline(in, row0);
  std::getline(in, row1);
  CHECK(header.rfind("NPU Name,Bench Name,", 0) == 0);
  CHECK(header.find("Err_message,Match,First Divergence") != std::string::npos);
  // output: Norm 15 vs 0 -> L2norm diff 15, NormRelativeErr inf (Max/Min/Mean
  // print the same: "0", as msprobe writes).
  CHECK(row1.find(",0,0,0,15,0,0,0,inf,") != std::string::npos);
  CHECK(row0.find(",0,0,0,0,0,0,0,0,") != std::string::npos);

  const char* tmp = std::getenv("GRAPHPROBE_TEST_TMP");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/test_compare_engine.csv";
  gc::write_csv(r, path);
  std::ifstream f(path);
  std::stringstream back;
  back << f.rdbuf();
  CHECK_EQ(back.str(), text);
}

void run_all() {
  python_float_repr();
  msprobe_cells();
  flattening();
  format_errors_name_the_place();
  verdict_rules();
  matching_and_unmatched();
  first_divergence_order();
  csv_output();
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run_all)
