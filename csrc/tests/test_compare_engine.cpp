// The compare engine on in-memory dump.json texts: row flattening, metrics,
// verdict rules, matching, first divergence, CSV. Expected values are worked
// out by hand in the comments.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include "compare/cell_text.h"
#include "compare/csv_writer.h"
#include "compare/comparison.h"
#include "compare/first_divergence.h"
#include "compare/noise_floor.h"
#include "compare/matching.h"
#include "compare/metrics.h"
#include "compare/msprobe_values.h"
#include "compare/text_feed.h"
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

// Writes the CSV with write_csv into the test folder and reads it back.
std::string written_csv(const gc::CompareResult& r, const std::string& file) {
  const char* tmp = std::getenv("GRAPHPROBE_TEST_TMP");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/" + file;
  gc::write_csv(r, path);
  std::ifstream f(path);
  std::stringstream back;
  back << f.rdbuf();
  return back.str();
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
  CHECK(m.kind[gc::kStatMax] == gc::StatDiff::kNumbers);
  CHECK_EQ(*m.diff[gc::kStatMax], 1.0);
  CHECK_EQ(*m.rel_pct[gc::kStatMax], 50.0);
  CHECK_EQ(gc::rel_cell(m, gc::kStatMax), std::string("50%"));
  // Equal prints: "0"; NaN and NaN print the same ("Nan").
  CHECK_EQ(gc::diff_cell(gc::compute_metrics(stat(NAN), stat(NAN)), gc::kStatMax), std::string("0"));
  // 1 vs 1.0 print differently: numbers, 0 %; 0 vs 0.0: a bench of 0, "inf".
  m = gc::compute_metrics(stat(1.0, gc::ValueKind::kInt), stat(1.0));
  CHECK(m.kind[gc::kStatMax] == gc::StatDiff::kNumbers && *m.rel_pct[gc::kStatMax] == 0.0);
  m = gc::compute_metrics(stat(0.0, gc::ValueKind::kInt), stat(0.0));
  CHECK_EQ(gc::diff_cell(m, gc::kStatMax), std::string("0"));
  CHECK_EQ(gc::rel_cell(m, gc::kStatMax), std::string("inf"));
  // Non-numbers: NaN vs a number "Nan"; a number vs inf "-inf"; None vs a number "Diff".
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(stat(NAN), stat(1.0)), gc::kStatMax), std::string("Nan"));
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(stat(1.0), stat(INFINITY)), gc::kStatMax), std::string("-inf"));
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(stat(INFINITY), stat(1.0)), gc::kStatMax), std::string("inf"));
  gc::TensorRecord none;
  m = gc::compute_metrics(none, stat(1.0));
  CHECK_EQ(gc::rel_cell(m, gc::kStatMax), std::string("Diff"));
  CHECK(!m.rel_pct[gc::kStatMax]);
  // Text: devices against each other are "N/A"; text that reads as a number is one.
  gc::TensorRecord cpu = stat(0, gc::ValueKind::kText), cuda = cpu, num = cpu;
  cpu.text = "cpu";
  cuda.text = "cuda:0";
  num.text = "2.5";
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(cpu, cuda), gc::kStatMax), std::string("N/A"));
  CHECK_EQ(gc::rel_cell(gc::compute_metrics(num, stat(2.0)), gc::kStatMax), std::string("25%"));
  CHECK_EQ(gc::stat_str(stat(1.0, gc::ValueKind::kBool), gc::kStatMax), std::string("True"));
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
  CHECK(d.rows[0].kinds[gc::kStatNorm] == gc::ValueKind::kInt && *d.rows[0].stats[gc::kStatNorm] == 1.0);
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
  CHECK_NEAR(*r.rows[1].metrics.rel_pct[gc::kStatNorm], 60.0, 1e-9);
  CHECK_NEAR(*r.rows[1].metrics.diff[gc::kStatNorm], 6.0, 1e-12);
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
  CHECK(std::isnan(*r.rows[0].metrics.diff[gc::kStatMax]));
  // dtype mismatch.
  r = run(doc(entry("E", tensor(10), tensor(10, "1.0", "torch.bfloat16"))), doc(entry("E", tensor(10), tensor(10))));
  CHECK(r.rows[1].verdict == gc::Verdict::kError);
  CHECK_EQ(r.rows[1].reasons->at(0), std::string("dtype mismatch: torch.bfloat16 vs torch.float32"));
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

void first_divergence_prefers_the_earlier_entry() {
  // A child completes (and is listed) before its parent; both have exact
  // inputs and a 20 % output: the origin is the child, entry 0.
  auto make = [](double k) {
    return doc(entry("Module.blk.fc.Linear.forward.0", tensor(10), tensor(10 * k)) + "," +
               entry("Module.blk.Block.forward.0", tensor(10), tensor(20 * k)));
  };
  auto r = run(make(1.2), make(1.0));
  CHECK(r.first_divergence && *r.first_divergence == 0u);
  CHECK(r.rows[0].first_divergence && r.rows[1].first_divergence);
  CHECK(!r.rows[2].first_divergence && !r.rows[3].first_divergence);
}

void duplicate_entries_follow_python_json() {
  // "a" twice: the second's records, at the first's place (before "b").
  const std::string t = doc(entry("a", tensor(1), tensor(1)) + "," + entry("b", tensor(2), tensor(2)) + "," +
                            entry("a", tensor(3), tensor(3)));
  gc::Dump d = gc::parse_dump(t, "t.json");
  CHECK_EQ(d.entries.size(), size_t{2});
  CHECK_EQ(d.entries[0], std::string("a"));
  CHECK_EQ(d.rows.size(), size_t{4});
  CHECK_EQ(d.rows[0].name, std::string("a.input.0"));
  CHECK_EQ(*d.rows[0].stats[gc::kStatNorm], 3.0);
  CHECK_EQ(d.rows[2].name, std::string("b.input.0"));
  CHECK_EQ(d.rows[2].entry, 1u);
  CHECK_EQ(d.notes.size(), size_t{1});
  CHECK(d.notes[0].find("\"a\" appears 2 times") != std::string::npos);
}

void csv_formula_cells() {
  CHECK_EQ(gc::csv_text("=cmd|' /C calc'!A0"), std::string("'=cmd|' /C calc'!A0"));
  for (const char* s : {"+1", "-1", "@SUM(A1)", "\tx", "\rx"}) CHECK_EQ(gc::csv_text(s), std::string("'") + s);
  CHECK_EQ(gc::csv_text("Module.a"), std::string("Module.a"));
  CHECK_EQ(gc::csv_text(""), std::string(""));
  auto r = run(doc(entry("=HYPERLINK(1)", tensor(-10), tensor(-15))), doc(entry("=HYPERLINK(1)", tensor(-10), tensor(-15))));
  const std::string text = gc::render_csv(r);
  CHECK(text.find("\n'=HYPERLINK(1).input.0,'=HYPERLINK(1).input.0,") != std::string::npos);
  CHECK(text.find(",-10,") != std::string::npos);  // numbers untouched
  // A non-tensor str argument's value fills its four statistics cells per
  // side: text from the dump, neutralised; an int value stays a number.
  const std::string args = R"({"type": "str", "value": "=1+2"}, {"type": "int", "value": -3})";
  const std::string values = gc::render_csv(run(doc(entry("E", args, tensor(1))), doc(entry("E", args, tensor(1)))));
  std::string eight_text, eight_ints;
  for (int i = 0; i < 8; ++i) {
    eight_text += ",'=1+2";
    eight_ints += ",-3";
  }
  CHECK(values.find("\nE.input.0,E.input.0,") != std::string::npos);
  CHECK(values.find(eight_text + ",") != std::string::npos);
  CHECK(values.find(eight_ints + ",") != std::string::npos);
  CHECK(values.find(",=1+2") == std::string::npos);
}

void csv_written_in_chunks_equals_rendered() {
  std::string entries;
  for (int i = 0; i < 5000; ++i) entries += (i ? "," : "") + entry("E" + std::to_string(i), tensor(i + 1), tensor(i + 2));
  auto r = run(doc(entries), doc(entries));
  CHECK_EQ(written_csv(r, "test_compare_engine_chunks.csv"), gc::render_csv(r));
}

void large_file_is_read_in_pieces() {
  // Over 16 MiB, the first piece TextFeed reads: entries straddle the piece
  // boundaries and are re-read; a duplicate key far past the first piece
  // still gets its true line, also when the text it counted lines in was
  // given back. Entries span several pages, so every release cuts one.
  auto two_lines = [](std::string e) { return e.replace(e.find("\"output\""), 0, std::string(3000, '\n')); };
  auto line_of = [](const std::string& text, size_t pos) {
    return std::to_string(1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
  };
  const char* tmp = std::getenv("GRAPHPROBE_TEST_TMP");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/test_compare_engine_large.json";
  std::string text = "{\"task\": \"statistics\", \"data\": {\n";
  size_t n = 0;
  while (text.size() < (size_t{40} << 20)) {
    text += (n ? ",\n" : "") + two_lines(entry("E" + std::to_string(n), tensor(static_cast<double>(n) + 1),
                                                 tensor(2.0 * static_cast<double>(n))));
    ++n;
  }
  text += ",\n";
  const size_t repeat_at = text.size();
  text += two_lines(entry("E0", tensor(-1), tensor(-1))) + "}}\n";
  {
    std::ofstream f(path, std::ios::binary);
    f << text;
  }
  // The row key's count, taken in the NUL check's pass (mapped) or by its
  // own, equals the text's, pieces straddled or not.
  auto occurrences = [&](const std::string& needle) {
    size_t k = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++k;
    return k;
  };
  {
    gc::TextFeed counted(path, "\"type\"");
    CHECK_EQ(counted.count("\"type\""), occurrences("\"type\""));
    CHECK_EQ(counted.count("\"Norm\": "), occurrences("\"Norm\": "));
    gc::TextFeed plain(path);
    CHECK_EQ(plain.count("\"type\""), occurrences("\"type\""));
  }
  const gc::Dump d = gc::read_dump(path);
  CHECK_EQ(d.entries.size(), n);
  CHECK_EQ(d.rows.size(), 2 * n);
  for (size_t i = 1; i < n; i += 997) {
    CHECK_EQ(d.rows[2 * i].name, "E" + std::to_string(i) + ".input.0");
    CHECK_EQ(*d.rows[2 * i].stats[gc::kStatNorm], static_cast<double>(i) + 1);
    CHECK_EQ(*d.rows[2 * i + 1].stats[gc::kStatNorm], 2.0 * static_cast<double>(i));
  }
  CHECK_EQ(*d.rows[0].stats[gc::kStatNorm], -1.0);  // the repeated E0: its last value, at its first place
  CHECK_EQ(d.notes.size(), size_t{1});
  CHECK(d.notes[0].find("again at line " + line_of(text, repeat_at)) != std::string::npos);
  // Malformed past the first piece: the error names the true line.
  const size_t bad_at = text.size() - 4 + 2;
  text.insert(text.size() - 4, ",\n\"bad\": [}");
  {
    std::ofstream f(path, std::ios::binary);
    f << text;
  }
  CHECK_THROWS(gc::DumpFormatError, gc::read_dump(path), ":" + line_of(text, bad_at) + ":9: expected a value");
  std::remove(path.c_str());
}

void file_that_shrinks_while_mapped_is_reported() {
  // A regular file is mapped (text_feed.h). Truncated by another process
  // while mapped, a read past its new end raised SIGBUS and ended the
  // process; it now reads zeros, and check_intact() names the file.
  const char* tmp = std::getenv("GRAPHPROBE_TEST_TMP");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/test_compare_engine_shrink.json";
  std::string entries;
  for (int i = 0; entries.size() < (size_t{1} << 20); ++i)
    entries += (i ? "," : "") + entry("E" + std::to_string(i), tensor(i + 1), tensor(i + 2));
  const std::string text = doc(entries);
  {
    std::ofstream f(path, std::ios::binary);
    f << text;
  }
  {
    gc::TextFeed feed(path);
    CHECK_EQ(feed.text().size(), text.size());
    CHECK(!feed.shrank());
    feed.check_intact();  // nothing to report yet
    CHECK_EQ(::truncate(path.c_str(), 4096), 0);
    const std::string_view t = feed.text();
    CHECK_EQ(t[t.size() - 1], '\0');  // past the new end: zeros
    CHECK_EQ(t[10], text[10]);        // before it: the text
    CHECK(feed.shrank());
    CHECK_THROWS(gc::DumpFormatError, feed.check_intact(), path + ": the file shrank to 4096 bytes while it was read");
  }
  // Read whole, the shorter file is simply what it holds: malformed here.
  CHECK_THROWS(gc::DumpFormatError, gc::read_dump(path), path);
  std::remove(path.c_str());

  // A SIGBUS outside every guarded range still ends the process as before
  // (the disposition the guard found: here the default one).
  const pid_t child = ::fork();
  if (child == 0) {
    {
      std::ofstream f(path, std::ios::binary);
      f << text;
    }
    gc::TextFeed feed(path);  // installs the guard
    std::remove(path.c_str());
    ::raise(SIGBUS);
    ::_exit(0);
  }
  int status = 0;
  CHECK_EQ(::waitpid(child, &status, 0), child);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS);
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

  CHECK_EQ(written_csv(r, "test_compare_engine.csv"), text);
}

// msprobe's real-data rules (RuleSet::kRealData) and CSV, from stored cells:
// the lowest output value decides, the first output row takes the verdict.
void real_data_rules_and_csv() {
  const std::string e = entry("Functional.split.0.forward", tensor(1.0), tensor(1.0) + ", " + tensor(1.0));
  gc::CompareResult r = run(doc(e), doc(e));
  CHECK_EQ(r.rows.size(), size_t{3});
  // input: exact; output.0: exact; output.1: ratio 0.05 (< 0.1), Cosine 0.7
  // (1.0 - 0.7 > 0.1); words skip ("unsupported" counts as no value).
  auto cells = [&](size_t i, double cos, double ratio) {
    r.rows[i].tensor.mut().status = gc::TensorStatus::kComputed;
    r.rows[i].tensor.mut().values = {cos, 0.5, 0.5, 0.5, ratio, ratio};
  };
  cells(0, 1.0, 1.0);
  cells(1, 1.0, 1.0);
  cells(2, 0.7, 0.05);
  r.rows[2].tensor.mut().values[gc::kEucDist] = std::nullopt;
  r.rows[2].tensor.mut().words[gc::kEucDist] = gc::CellWord::kUnsupported;
  gc::finish_tensor_compare(r, gc::CompareOptions{});
  CHECK(r.rows[0].verdict == gc::Verdict::kPass);
  CHECK(r.rows[1].verdict == gc::Verdict::kError);  // the first output, though exact
  CHECK_EQ(r.rows[1].reasons->size(), size_t{2});    // the ratio error and the Cosine warning
  CHECK(r.rows[2].verdict == gc::Verdict::kPass);
  const std::string text = gc::render_csv(r);
  CHECK(text.rfind("NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,NPU "
                   "Requires_grad,Bench Requires_grad,Cosine,EucDist,MaxAbsErr,MaxRelativeErr,",
                   0) == 0);
  CHECK(text.find(",Err_message,Data_name,Match,First Divergence\n") != std::string::npos);
  CHECK(text.find(",0.7,unsupported,0.5,0.5,0.05,0.05,") != std::string::npos);
  CHECK(text.find("\"['-1', '-1']\"") != std::string::npos);  // no data_name: msprobe's "-1"

  // Thresholds apply: an output ratio limit of 0 never fires; a Cosine drop
  // of 0.5 allowed does not warn.
  gc::CompareResult q = run(doc(e), doc(e));
  for (size_t i = 0; i < 3; ++i) q.rows[i].tensor = r.rows[i].tensor;
  gc::CompareOptions relaxed;
  relaxed.thresholds.thousandth_output_max = 0;
  relaxed.thresholds.cosine_drop = 0.5;
  gc::finish_tensor_compare(q, relaxed);
  CHECK(q.rows[1].verdict == gc::Verdict::kPass);

  // graphprobe's layout: statistics columns, each output judged.
  gc::CompareResult g = run(doc(e), doc(e));
  for (size_t i = 0; i < 3; ++i) g.rows[i].tensor = r.rows[i].tensor;
  gc::CompareOptions ours;
  ours.tensor_layout = gc::TensorLayout::kStatisticsPlusTensor;
  gc::finish_tensor_compare(g, ours);
  CHECK(g.rows[1].verdict == gc::Verdict::kPass);
  CHECK(g.rows[2].verdict == gc::Verdict::kError);
  CHECK(gc::render_csv(g).find(",NormRelativeErr,") != std::string::npos);
}


// A tensor record with every statistic given (first-divergence tests).
std::string rec(double mx, double mn, double mean, double norm, const std::string& dtype = "torch.float32",
                const std::string& shape = "[4]") {
  return R"({"type": "torch.Tensor", "dtype": ")" + dtype + R"(", "shape": )" + shape +
         R"(, "Max": )" + gc::format_number(mx) + R"(, "Min": )" + gc::format_number(mn) + R"(, "Mean": )" +
         gc::format_number(mean) + R"(, "Norm": )" + gc::format_number(norm) + R"(, "requires_grad": false})";
}

std::string module(const std::string& name, const std::string& in, const std::string& weight, const std::string& out) {
  return "\"" + name + R"(": {"input_args": [)" + in + R"(], "input_kwargs": {}, "parameters": {"weight": )" + weight +
         R"(}, "output": [)" + out + "]}";
}

// A record views its dump's names and sizes (RecordArena): the dumps read
// here are kept for the test's run.
std::vector<gc::Dump>& kept_dumps() {
  static std::vector<gc::Dump> dumps;
  return dumps;
}

gc::TensorRecord record_of(const std::string& r) {
  kept_dumps().push_back(gc::parse_dump(doc(entry("E", "", r)), "x.json"));
  return kept_dumps().back().rows.at(0);
}

void row_error_is_scale_aware() {
  // Bench [1, -1, 1, -1]: Max 1, Min -1, Mean 0, Norm 2, RMS 2 / sqrt(4) = 1.
  // Target Mean 1e-3 off (an additive fault): Mean error |1e-3 - 0| / max(0, 1)
  // = 1e-3, which NormRelativeErr-style |dt / b| would make infinite and the
  // Norm (2.000001...) barely shows.
  const auto b = record_of(rec(1, -1, 0, 2));
  auto e = gc::row_error(record_of(rec(1.001, -0.999, 0.001, 2.000002)), b, 1.0);
  CHECK_NEAR(*e.e[gc::kStatMax], 1e-3, 1e-15);
  CHECK_NEAR(*e.e[gc::kStatMin], 1e-3, 1e-15);
  CHECK_NEAR(*e.e[gc::kStatMean], 1e-3, 1e-15);
  CHECK_NEAR(*e.e[gc::kStatNorm], 1e-6, 1e-15);
  CHECK_NEAR(e.z, 10.0, 1e-9);  // 1e-3 / float32's 1e-4
  CHECK(e.hard.empty() && std::string(e.floor->name) == "float32");
  // floor_scale 100: z 0.1.
  CHECK_NEAR(gc::row_error(record_of(rec(1.001, -0.999, 0.001, 2.000002)), b, 100.0).z, 0.1, 1e-9);
  // bfloat16: Max/Min use the extreme floor 1.6e-2, Mean/Norm 2e-3 (64
  // elements of +-1: a Norm over enough elements for the table's floors).
  const auto bb = record_of(rec(1, -1, 0, 8, "torch.bfloat16", "[64]"));
  e = gc::row_error(record_of(rec(1.008, -1, 0, 8, "torch.bfloat16", "[64]")), bb, 1.0);
  CHECK_NEAR(e.z, 0.008 / 1.6e-2, 1e-9);
  CHECK(e.worst_stat == gc::kStatMax);
  e = gc::row_error(record_of(rec(1, -1, 0, 8.032, "torch.bfloat16", "[64]")), bb, 1.0);
  CHECK_NEAR(e.z, 0.004 / 2e-3, 1e-9);
  // Four elements: the Norm rests on them, its floor an ulp / sqrt(4).
  const auto b4 = record_of(rec(1, -1, 0, 2, "torch.bfloat16"));
  e = gc::row_error(record_of(rec(1, -1, 0, 2.008, "torch.bfloat16")), b4, 1.0);
  CHECK_NEAR(e.z, 0.004 / (0x1p-7 / 2), 1e-9);
  CHECK(e.effective_elements == 4);
  // Norm of 0: equal -> 0; a normal target value -> far beyond every floor
  // (measured against float32's smallest normal number, 2^-126); a
  // subnormal one (rounding, or a flush to zero on the bench) -> within it.
  const auto zero = record_of(rec(0, 0, 0, 0));
  CHECK(gc::row_error(record_of(rec(0, 0, 0, 0)), zero, 1.0).z == 0.0);
  CHECK(gc::row_error(record_of(rec(0, 0, 0, 1e-30)), zero, 1.0).z > 1e6);
  CHECK(gc::row_error(record_of(rec(0, 0, 0, 1e-43)), zero, 1.0).z < 1.0);
  // NaN and infinities: both NaN 0, one NaN inf, equal infinities 0.
  const auto nan_b = record_of(rec(1, -1, 0, 2).replace(rec(1, -1, 0, 2).find("\"Max\": 1"), 8, "\"Max\": NaN"));
  CHECK(std::isnan(*nan_b.stats[gc::kStatMax]));
  CHECK(gc::row_error(nan_b, nan_b, 1.0).z == 0.0);
  CHECK(std::isinf(gc::row_error(nan_b, b, 1.0).z));  // target NaN, bench finite: also a hard difference
  CHECK(!gc::row_error(nan_b, b, 1.0).hard.empty());
  CHECK(std::isinf(gc::row_error(b, nan_b, 1.0).z));
  // Hard differences: dtype, shape; integer tensors are exact.
  CHECK(std::isinf(gc::row_error(record_of(rec(1, -1, 0, 2, "torch.float16")), b, 1.0).z));
  CHECK(std::isinf(gc::row_error(record_of(rec(1, -1, 0, 2, "torch.float32", "[2, 2]")), b, 1.0).z));
  const auto ib = record_of(rec(3, 0, 1, 5, "torch.int64"));
  CHECK(gc::row_error(record_of(rec(3, 0, 1, 5, "torch.int64")), ib, 1.0).z == 0.0);
  CHECK(std::isinf(gc::row_error(record_of(rec(3, 0, 1.25, 5, "torch.int64")), ib, 1.0).z));
  // The table: one place, floors as documented.
  CHECK_EQ(std::string(gc::noise_floor_for("torch.float64", true).name), std::string("float64"));
  CHECK_EQ(std::string(gc::noise_floor_for("torch.bfloat16", true).name), std::string("bfloat16"));
  CHECK_EQ(std::string(gc::noise_floor_for("torch.float8_e4m3fn", true).name), std::string("float8_e4m3"));
  CHECK_EQ(std::string(gc::noise_floor_for("torch.float8_e5m2fnuz", true).name), std::string("float8_e5m2"));
  CHECK_EQ(std::string(gc::noise_floor_for("torch.uint8", true).name), std::string("exact"));
  CHECK_EQ(std::string(gc::noise_floor_for("torch.bool", true).name), std::string("exact"));
  CHECK_EQ(std::string(gc::noise_floor_for("<class 'float'>", false).name), std::string("exact"));
  bool assumed = false;
  CHECK_EQ(std::string(gc::noise_floor_for("torch.float8_e8m0fnu", true, &assumed).name), std::string("float32"));
  CHECK(assumed);
  CHECK_EQ(gc::noise_floor_for("torch.float16", true).aggregate, 1e-3);
  CHECK_EQ(gc::noise_floor_for("torch.float16", true).extreme, 2e-3);
  CHECK_EQ(gc::short_number(1e-4), std::string("1e-4"));
  CHECK_EQ(gc::short_number(2.5e-6), std::string("2.5e-6"));
  CHECK_EQ(gc::short_number(0.1), std::string("0.1"));
  CHECK_EQ(gc::short_number(30), std::string("30"));
}

void divergence_kinds() {
  const std::string x = rec(1, -1, 0, 2);
  // a: Linear with weight; b: output x1.001 (a graph-only fault); c: downstream.
  auto make = [&](double k, double w) {
    return doc(module("Module.a.Linear.forward.0", x, rec(1 * w, -1 * w, 0, 2 * w), x) + "," +
               entry("Module.b.Act.forward.0", x, rec(k, -k, 0, 2 * k)) + "," +
               entry("Module.c.Linear.forward.0", rec(k, -k, 0, 2 * k), rec(2 * k, -2 * k, 0, 4 * k)));
  };
  auto r = run(make(1.001, 1.0), make(1.0, 1.0));
  CHECK(r.first_divergence && *r.first_divergence == 1u);
  CHECK(r.divergence && r.divergence->kinds == gc::kOutputCause);
  CHECK_NEAR(r.divergence ? r.divergence->error.z : -1, 10.0, 1e-6);  // 1e-3 / 1e-4
  CHECK(r.divergence && r.divergence->message.find("output 0: Norm 0.1 %, 10x the float32 floor 1e-4") == 0);
  CHECK(r.rows[0].z && *r.rows[0].z == 0.0);
  // Clean pair: nothing; the noise seen is over every row.
  r = run(make(1.0, 1.0), make(1.0, 1.0));
  CHECK(!r.first_divergence && !r.divergence && !r.noise.upstream && r.noise.rows == 7);
  // Weight x1.3: the parameter is the cause, though the inputs are exact and
  // msprobe's rules count the weight among the inputs.
  r = run(make(1.0, 1.3), make(1.0, 1.0));
  CHECK(r.first_divergence && *r.first_divergence == 0u);
  CHECK(r.divergence && r.divergence->kinds == gc::kParameterCause);
  CHECK(r.divergence && r.divergence->message.find("parameter `weight` differs: ") == 0);
  CHECK(r.divergence && !r.divergence->parameters_throughout);  // one parameter row: no drift claim
  // bfloat16: Max one ulp-ish off (1 %: z 0.625 against the 1.6e-2 extreme
  // floor) upstream and on b's input; b's Norm 1 % off (z 5 against 2e-3).
  // Weighed within each class of statistic the Norm is not explained by the
  // Max (a single max over both classes would need z > 6.25 and miss it).
  const std::string bf = "torch.bfloat16";
  auto bmake = [&](double max_off, double norm_k) {
    const std::string n = "[64]";  // 64 elements of +-1: Norm 8
    return doc(entry("Module.a.Linear.forward.0", rec(1, -1, 0, 8, bf, n), rec(1 * max_off, -1, 0, 8, bf, n)) + "," +
               entry("Module.b.MLP.forward.0", rec(1 * max_off, -1, 0, 8, bf, n), rec(1 * max_off, -1, 0, 8 * norm_k, bf, n)));
  };
  r = run(bmake(1.01, 1.01), bmake(1.0, 1.0));
  CHECK(r.first_divergence && *r.first_divergence == 1u);
  CHECK(r.divergence && r.divergence->kinds == gc::kOutputCause);
  CHECK(r.divergence && r.divergence->message.find("output 0: Norm 1 %, 5x the bfloat16 floor 2e-3, while its inputs' Means and Norms agree exactly") == 0);
  CHECK(!run(bmake(1.01, 1.0), bmake(1.0, 1.0)).first_divergence);  // the Max noise alone: nothing
  // Floor scaled beyond the fault: nothing (planted "floor fixed at 10 %"
  // must not pass the x1.001 case above).
  gc::CompareOptions loose;
  loose.thresholds.floor_scale = 1e3;  // 1e-4 x 1e3 = 10 %
  CHECK(!run(make(1.001, 1.0), make(1.0, 1.0), loose).first_divergence);
}

void divergence_from_unrecorded_code() {
  // a and b agree; between b and c an unrecorded multiply scales by 1.01, and
  // a call recorded only in the target (u) sits in between: c's input differs.
  const std::string x = rec(1, -1, 0, 2), y = rec(1.01, -1.01, 0, 2.02);
  const std::string t = doc(entry("A.forward.0", x, x) + "," + entry("B.forward.0", x, x) + "," +
                            entry("U.forward.0", x, x) + "," + entry("C.forward.0", y, y));
  const std::string b = doc(entry("A.forward.0", x, x) + "," + entry("B.forward.0", x, x) + "," +
                            entry("C.forward.0", x, x));
  auto r = run(t, b);
  CHECK(r.first_divergence && *r.first_divergence == 3u);
  CHECK(r.divergence && r.divergence->kinds == gc::kUnrecordedInput);
  CHECK(r.divergence && r.divergence->last_agreeing && *r.divergence->last_agreeing == 1u);
  CHECK_EQ(r.divergence ? r.divergence->unmatched_between.size() : 0, size_t{1});
  CHECK(r.divergence && r.divergence->message.find("between B.forward.0 (the last agreeing record) and this call") !=
        std::string::npos);
  CHECK(r.divergence && r.divergence->message.find("recorded on one side only: U.forward.0") != std::string::npos);
  CHECK(r.noise.upstream && r.noise.rows == 4 && r.noise.max_z == 0.0);
  // The first entry's inputs differ: the model's inputs.
  r = run(doc(entry("A.forward.0", y, y)), doc(entry("A.forward.0", x, x)));
  CHECK(r.divergence && r.divergence->message.find("the model's inputs already differ") != std::string::npos);
  // Upstream noise explains a small input error: e <= R x U + floor, here
  // U = 5e-5 (A's output Max), R = 4, floor 1e-4: up to 3e-4. C's input Max
  // 2.5e-4 off (z 2.5) is explained; 5e-4 off is not.
  const std::string n = rec(1.00005, -1, 0, 2), m = rec(1.00025, -1, 0, 2), m2 = rec(1.0005, -1, 0, 2);
  r = run(doc(entry("A.forward.0", x, n) + "," + entry("C.forward.0", m, m)),
          doc(entry("A.forward.0", x, x) + "," + entry("C.forward.0", x, x)));
  CHECK(!r.first_divergence);
  CHECK_NEAR(r.noise.max_z, 2.5, 1e-6);
  r = run(doc(entry("A.forward.0", x, n) + "," + entry("C.forward.0", m2, m2)),
          doc(entry("A.forward.0", x, x) + "," + entry("C.forward.0", x, x)));
  CHECK(r.first_divergence && *r.first_divergence == 1u);
  CHECK(r.divergence && r.divergence->kinds == gc::kUnrecordedInput);
  CHECK(r.divergence && r.divergence->message.find(", 10x anything recorded before it") != std::string::npos);
}

void parameter_names_and_drift() {
  // A module called input_proj with a parameter called "parameters": only the
  // ".parameters." segment right after the entry name makes a parameter row.
  const std::string x = rec(1, -1, 0, 2), w = rec(1.3, -1.3, 0, 2.6);
  auto r = run(doc(module("Module.input_proj.Linear.forward.0", x, w, x)),
               doc(module("Module.input_proj.Linear.forward.0", x, x, x)));
  CHECK(r.divergence && r.divergence->kinds == gc::kParameterCause);
  CHECK(r.divergence && r.divergence->message.find("parameter `weight`") == 0);
  // A keyword argument named "parameters" is an input, not a parameter.
  r = run(doc(R"("F.forward.0": {"input_args": [], "input_kwargs": {"parameters": )" + w + R"(}, "output": [)" + w + "]}"),
          doc(R"("F.forward.0": {"input_args": [], "input_kwargs": {"parameters": )" + x + R"(}, "output": [)" + x + "]}"));
  CHECK(r.divergence && r.divergence->kinds == gc::kUnrecordedInput);
  // Every weight differs: training drift.
  auto all = [&](const std::string& v) {
    return doc(module("M.a.forward.0", x, v, x) + "," + module("M.b.forward.0", x, v, x) + "," +
               module("M.c.forward.0", x, v, x));
  };
  r = run(all(w), all(x));
  CHECK(r.divergence && r.divergence->parameters_throughout);
  CHECK(r.divergence && r.divergence->parameter_rows == 3 && r.divergence->parameter_rows_differing == 3);
  CHECK(r.divergence && r.divergence->message.find("earlier step's update") != std::string::npos);
}

void discrete_outputs_and_python_floats() {
  // An argmax whose float inputs agree within their floor (1e-6, z 0.01)
  // and whose index changes: the change is its own (issue 35: a router that
  // sends a token elsewhere). With exact inputs too.
  const std::string x = rec(1, -1, 0, 2), xn = rec(1.000001, -1, 0, 2);
  const std::string i3 = rec(3, 3, 3, 3, "torch.int64", "[1]"), i2 = rec(2, 2, 2, 2, "torch.int64", "[1]");
  auto r = run(doc(entry("Torch.argmax.0.forward", xn, i2)), doc(entry("Torch.argmax.0.forward", x, i3)));
  CHECK(r.divergence && r.divergence->kinds == (gc::kOutputCause | gc::kIntegerOutput));
  CHECK(r.divergence && r.divergence->message.find("integer output changed") != std::string::npos);
  CHECK(r.rows[1].z && std::isinf(*r.rows[1].z));  // the row's own z says it differs
  r = run(doc(entry("Torch.argmax.0.forward", x, i2)), doc(entry("Torch.argmax.0.forward", x, i3)));
  CHECK(r.divergence && r.divergence->kinds == (gc::kOutputCause | gc::kIntegerOutput));
  // An argmax whose inputs differ beyond their floor, as the noise upstream
  // explains (2e-4: z 2, within R x the 5e-5 before it), may flip: not a
  // divergence. A flipped argmax upstream neither hides a later fault nor
  // becomes one: a -> argmax (flips) -> b consumes the index (differs,
  // recorded cause) -> unrecorded x1.05 -> c's float input. The index row
  // stays out of U and of the noise; c is named.
  const std::string xa = rec(1.00005, -1, 0, 2), xb = rec(1.0002, -1, 0, 2);
  const std::string y = rec(1.05, -1.05, 0, 2.1);
  const std::string ti = doc(entry("A.forward.0", xn, xa) + "," + entry("Torch.argmax.0.forward", xb, i2) + "," +
                             entry("B.forward.0", i2, x) + "," + entry("C.forward.0", y, y));
  const std::string bi = doc(entry("A.forward.0", x, x) + "," + entry("Torch.argmax.0.forward", x, i3) + "," +
                             entry("B.forward.0", i3, x) + "," + entry("C.forward.0", x, x));
  r = run(ti, bi);
  CHECK(r.first_divergence && *r.first_divergence == 3u);
  CHECK(r.divergence && r.divergence->kinds == gc::kUnrecordedInput);
  // The argmax whose index changed is not "the last agreeing record".
  CHECK(r.divergence && r.divergence->last_agreeing && *r.divergence->last_agreeing == 0u);
  CHECK(std::isfinite(r.noise.max_z));
  // A Python float is weighed against the float32 floor: 1e-7 relative is
  // noise (z 1e-3), 1e-3 is not (z 10); an int that differs is hard.
  auto scalar = [](const std::string& v) {
    return R"("F.0.forward": {"input_args": [{"type": "float", "value": )" + v + R"(}], "output": []})";
  };
  CHECK(!run(doc(scalar("0.50000005")), doc(scalar("0.5"))).first_divergence);
  r = run(doc(scalar("0.5005")), doc(scalar("0.5")));
  CHECK(r.divergence && r.rows[0].z);
  CHECK_NEAR(r.rows[0].z ? *r.rows[0].z : -1, 10.0, 1e-6);
  r = run(doc(R"("F.0.forward": {"input_args": [{"type": "int", "value": 2}], "output": []})"),
          doc(R"("F.0.forward": {"input_args": [{"type": "int", "value": 3}], "output": []})"));
  CHECK(r.divergence && r.divergence->error.hard == "value differs: 2 vs 3");
}

void mixed_precision_outputs() {
  // Eager rounds an intermediate to bfloat16 before .to(float32); a compiler
  // may keep it in float32: the recorded bf16 input agrees exactly, the
  // float32 output differs at bfloat16's rounding (Min 0.15 %). Measured
  // against the bfloat16 floor of the data upstream that is noise; so is
  // the float32 consumer's input.
  const std::string bf = "torch.bfloat16", f32 = "torch.float32";
  const std::string n = "[64]";  // 64 elements of +-1: Norm 8
  const std::string in = rec(1, -1, 0, 8, bf, n), out_b = rec(1, -1, 0, 8, f32, n), out_t = rec(1, -1.0015, 0, 8, f32, n);
  auto make = [&](const std::string& o, const std::string& next_out) {
    return doc(entry("Tensor.to.0.forward", in, o) + "," + entry("Tensor.pow.0.forward", o, next_out));
  };
  auto r = run(make(out_t, out_t), make(out_b, out_b));
  CHECK(!r.first_divergence);
  CHECK(r.rows[1].z && *r.rows[1].z < 1);  // the output: 1.5e-3 / 1.6e-2
  CHECK(r.rows[2].z && *r.rows[2].z < 1);  // the consumer's float32 input too: bfloat16 data upstream
  const auto e = gc::row_error_of(r, 1);
  CHECK(e.floor_from_upstream && std::string(e.floor->name) == "bfloat16");
  // A real fault on such an output (Norm 1 %) is named, against bfloat16's floor.
  r = run(make(rec(1, -1, 0, 8.08, f32, n), out_b), make(out_b, out_b));
  CHECK(r.first_divergence && *r.first_divergence == 0u);
  CHECK(r.divergence &&
        r.divergence->message.find("output 0: Norm 1 %, 5x the bfloat16 floor 2e-3 (of the data upstream)") == 0);
}

void coverage_of_the_sides() {
  const std::string x = rec(1, -1, 0, 2);
  const std::string full = doc(entry("A.forward.0", x, x) + "," + entry("B.forward.0", x, x) + "," +
                               entry("C.forward.0", x, x));
  auto r = run(doc(""), full);
  CHECK_EQ(r.coverage.problem.rfind("the target recorded nothing", 0), size_t{0});
  CHECK(r.coverage.problem.find("bench: 3 entries, 6 rows") != std::string::npos);
  r = run(full, doc(entry("A.forward.0", x, x)));
  CHECK_EQ(r.coverage.problem.rfind("the bench is short: only 2 of the 6 rows", 0), size_t{0});
  r = run(full, doc(entry("A.forward.0", x, x) + "," + entry("B.forward.0", x, x)));
  CHECK(r.coverage.problem.empty());  // 4 of 6 matched
  r = run(full, full);
  CHECK(r.coverage.problem.empty() && r.coverage.matched_rows == 6);
}


void numbers_read_as_from_chars() {
  // The direct reader converts most numbers itself (Clinger's exact case,
  // the digits read eight at a time) and hands the rest to from_chars: the
  // value must be from_chars' own, bit for bit, for every way a number is
  // written -- shortest round trip, %.17g, %.15g, %e, random digit strings
  // with the point anywhere, leading zeros, exponents at the fast path's
  // edges (|10^k| <= 22, mantissa 2^53).
  std::vector<std::string> texts = {"0", "-0", "0.0", "-0.0", "1", "-1", "0.1", "1e22", "1e23", "-1e-22", "1e-23",
                                    "9007199254740992", "9007199254740993", "9007199254740991.5", "123456789012345678",
                                    "1234567890123456789", "12345678901234567890", "0.0000000000000000000001234",
                                    "1.7976931348623157e308", "5e-324", "2.2250738585072014e-308", "4.9E-324",
                                    "1E+2", "1e+0", "1e-0", "100000000000000000000000", "0.30000000000000004",
                                    "99999999.99999999", "12345678.12345678", "1.00000000000000000000001"};
  std::mt19937_64 rng(38);
  char buf[64];
  for (int i = 0; i < 60000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, 8);
    if (!std::isfinite(d)) continue;
    texts.emplace_back(buf, std::to_chars(buf, buf + sizeof buf, d).ptr);
    // statistics-like magnitudes, and their float32 roundings
    const double x = std::ldexp(static_cast<double>(rng() >> 11) / 9007199254740992.0, static_cast<int>(rng() % 80) - 40);
    texts.emplace_back(buf, std::to_chars(buf, buf + sizeof buf, x).ptr);
    texts.emplace_back(buf, std::to_chars(buf, buf + sizeof buf, static_cast<double>(static_cast<float>(x))).ptr);
    std::snprintf(buf, sizeof buf, "%.17g", x);
    texts.emplace_back(buf);
    std::snprintf(buf, sizeof buf, "%.15g", -x);
    texts.emplace_back(buf);
    std::snprintf(buf, sizeof buf, "%.16e", x);
    texts.emplace_back(buf);
    // 1-24 random digits, the point anywhere (or none), an exponent or none
    std::string t = (rng() & 1) ? "-" : "";
    const int n = 1 + static_cast<int>(rng() % 24);
    std::string digits;
    for (int k = 0; k < n; ++k) digits += static_cast<char>('0' + rng() % 10);
    if (digits.size() > 1 && digits[0] == '0') digits[0] = '1' + static_cast<char>(rng() % 9);
    const int point = static_cast<int>(rng() % (n + 1));
    if (point == 0 || point == n) {
      t += digits;
    } else if (rng() & 1) {
      t += "0." + std::string(rng() % 6, '0') + digits;
    } else {
      t += digits.substr(0, point) + "." + digits.substr(point);
    }
    if (rng() % 3 == 0) t += "e" + std::to_string(static_cast<int>(rng() % 60) - 30);
    texts.push_back(t);
  }
  std::string entries;
  for (size_t i = 0; i < texts.size(); ++i)
    entries += (i ? "," : "") + entry("E" + std::to_string(i), tensor(1.0, texts[i]), tensor(1.0));
  const gc::Dump d = gc::parse_dump(doc(entries), "t.json");
  CHECK_EQ(d.rows.size(), 2 * texts.size());
  size_t differ = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    double want = 0;
    const auto res = std::from_chars(texts[i].data(), texts[i].data() + texts[i].size(), want);
    CHECK(res.ec == std::errc() && res.ptr == texts[i].data() + texts[i].size());
    const gc::TensorRecord& r = d.rows[2 * i];
    const double got = *r.stats[gc::kStatMax];
    const bool integer = texts[i].find_first_of(".eE") == std::string::npos;
    if (std::memcmp(&got, &want, 8) != 0 || r.kinds[gc::kStatMax] != (integer ? gc::ValueKind::kInt : gc::ValueKind::kFloat)) {
      if (differ++ < 5) std::fprintf(stderr, "number %s: read %.17g, from_chars %.17g\n", texts[i].c_str(), got, want);
    }
  }
  CHECK_EQ(differ, size_t{0});
}

void whitespace_runs_as_json_allows() {
  // The direct reader skips whitespace runs eight bytes a step: any run of
  // ' ', '\n', '\t', '\r' (0 to 40 bytes, across every alignment) between
  // tokens reads as the same records as the text without it, and any other
  // byte in a run (a control character, a '!') is refused, as JSON says.
  std::string entries;
  for (int i = 0; i < 40; ++i)
    entries += (i ? "," : "") + entry("Module.layers." + std::to_string(i) + ".Linear.forward.0",
                                      tensor(1.0 + i, "2.5") + "," + tensor(2.0, "3"), tensor(4.0 + i));
  const std::string plain = doc(entries);
  const gc::Dump want = gc::parse_dump(plain, "t.json");
  CHECK_EQ(want.rows.size(), size_t{120});
  std::mt19937_64 rng(38);
  const char kWs[] = {' ', '\n', '\t', '\r'};
  // A run between tokens: after and before every structural character,
  // never inside a string.
  auto spaced = [&](const std::string& text, char intruder) {
    std::string out;
    bool in_string = false, escaped = false;
    size_t runs = 0;
    auto run = [&] {
      const size_t n = rng() % 3 == 0 ? 0 : rng() % 41;
      const size_t bad = intruder != 0 && runs++ == 57 ? rng() % (n + 1) : SIZE_MAX;
      for (size_t k = 0; k <= n; ++k) {
        if (k == bad) out.push_back(intruder);
        if (k < n) out.push_back(kWs[rng() % 4]);
      }
    };
    for (char c : text) {
      if (in_string) {
        out.push_back(c);
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
        continue;
      }
      if (c == ' ') continue;  // the text's own spaces: replaced by runs
      const bool structural = c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ',';
      if (structural) run();
      out.push_back(c);
      if (structural) run();
      if (c == '"') in_string = true;
    }
    return out;
  };
  for (int round = 0; round < 200; ++round) {
    const std::string text = spaced(plain, 0);
    const gc::Dump got = gc::parse_dump(text, "t.json");
    bool same = got.rows.size() == want.rows.size() && got.entries == want.entries;
    for (size_t i = 0; same && i < want.rows.size(); ++i) {
      const gc::TensorRecord &a = got.rows[i], &b = want.rows[i];
      same = a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.kinds == b.kinds &&
             a.requires_grad == b.requires_grad;
      for (int s = 0; same && s < gc::kNumStats; ++s)
        same = a.stats[s].has_value() == b.stats[s].has_value() && (!a.stats[s] || *a.stats[s] == *b.stats[s]);
    }
    if (!same) {
      ::graphprobe::test::fail(__FILE__, __LINE__, "records differ with whitespace runs (round " + std::to_string(round) + ")");
      break;
    }
  }
  for (char intruder : {'\x0b', '\x0c', '\x01', '\x1f', '!', '\x7f'}) {
    for (int round = 0; round < 20; ++round) {
      bool thrown = false;
      try {
        gc::parse_dump(spaced(plain, intruder), "t.json");
      } catch (const gc::DumpFormatError&) {
        thrown = true;
      }
      if (!thrown)
        ::graphprobe::test::fail(__FILE__, __LINE__, "byte " + std::to_string(static_cast<int>(intruder)) +
                                                         " in a whitespace run was read");
    }
  }
}

void csv_number_cells_as_format_number() {
  // The CSV writes a row's numbers through a buffer of its own (NumberRun,
  // csv_writer.cpp): each statistic's cell must still be format_number of
  // the value read, NaN and the infinities included, in every column.
  std::mt19937_64 rng(381);
  std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 5e-324, -2.2250738585072014e-308, 1.7976931348623157e308,
                                1e22, 9007199254740993.0, 123456789012345678.0, 0.1, 1e-7, 1e16, 1e15};
  for (int i = 0; i < 4000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, 8);
    if (std::isfinite(d)) values.push_back(d);
    values.push_back(std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 120) - 90));
  }
  auto text_of = [](double v) -> std::string {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    char buf[64];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  };
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity()};
  std::string t_entries, b_entries;
  std::vector<std::array<double, 8>> want;  // per row: target Max, Min, Mean, Norm, then the bench's
  for (size_t i = 0; i + 8 <= values.size(); i += 8) {
    std::array<double, 8> v;
    for (int k = 0; k < 8; ++k) v[k] = values[i + k];
    if (i % 40 == 0) v[i / 40 % 8] = specials[i / 40 % 3];
    want.push_back(v);
    auto rec = [&](int o) {
      return R"({"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": )" + text_of(v[o]) +
             R"(, "Min": )" + text_of(v[o + 1]) + R"(, "Mean": )" + text_of(v[o + 2]) + R"(, "Norm": )" +
             text_of(v[o + 3]) + "}";
    };
    const std::string name = "E" + std::to_string(i);
    t_entries += (t_entries.empty() ? "" : ",") + entry(name, rec(0), rec(0));
    b_entries += (b_entries.empty() ? "" : ",") + entry(name, rec(4), rec(4));
  }
  const std::string text = gc::render_csv(run(doc(t_entries), doc(b_entries)));
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) lines.push_back(text.substr(at, nl - at));
  CHECK_EQ(lines.size(), 1 + 2 * want.size());
  size_t differ = 0;
  for (size_t row = 0; row + 1 < lines.size() && row / 2 < want.size(); ++row) {
    // Unquoted cells up to the statistics: names, dtypes, the shape "[2]",
    // flags, the 8 diff and relative-error cells.
    std::vector<std::string> cells;
    for (size_t at = 0, c;; at = c + 1) {
      c = lines[row + 1].find(',', at);
      cells.push_back(lines[row + 1].substr(at, c == std::string::npos ? std::string::npos : c - at));
      if (c == std::string::npos || cells.size() == 24) break;
    }
    for (int k = 0; k < 8 && cells.size() == 24; ++k)
      if (cells[16 + k] != gc::format_number(want[row / 2][k]) && differ++ < 5)
        std::fprintf(stderr, "row %zu column %d: '%s', format_number '%s'\n", row, 16 + k, cells[16 + k].c_str(),
                     gc::format_number(want[row / 2][k]).c_str());
    if (cells.size() != 24) ++differ;
  }
  CHECK_EQ(differ, size_t{0});
}

void run_all() {
  python_float_repr();
  msprobe_cells();
  flattening();
  format_errors_name_the_place();
  verdict_rules();
  matching_and_unmatched();
  first_divergence_order();
  first_divergence_prefers_the_earlier_entry();
  duplicate_entries_follow_python_json();
  csv_output();
  csv_formula_cells();
  csv_written_in_chunks_equals_rendered();
  large_file_is_read_in_pieces();
  file_that_shrinks_while_mapped_is_reported();
  numbers_read_as_from_chars();
  whitespace_runs_as_json_allows();
  csv_number_cells_as_format_number();
  real_data_rules_and_csv();
  row_error_is_scale_aware();
  divergence_kinds();
  divergence_from_unrecorded_code();
  parameter_names_and_drift();
  discrete_outputs_and_python_floats();
  mixed_precision_outputs();
  coverage_of_the_sides();
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run_all)
