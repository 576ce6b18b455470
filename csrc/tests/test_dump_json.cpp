// dump.json building: call grouping, naming, ordering, nesting and values.
#include <cmath>
#include <string>

#include "check.h"
#include "format/dump_json.h"
#include "format/json_writer.h"

using graphprobe::TensorRow;
using graphprobe::ValueKind;

namespace {

TensorRow row(const std::string& entry, const std::string& place, double max, double min, double sum, double sumsq,
              int64_t numel) {
  TensorRow r;
  r.entry = entry;
  r.place = place;
  r.dtype = "torch.float32";
  r.shape = {numel};
  r.numel = numel;
  r.max = max;
  r.min = min;
  r.sum = sum;
  r.sumsq = sumsq;
  return r;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

void numbers() {
  using graphprobe::json::number;
  CHECK_EQ(number(1.0), std::string("1.0"));
  CHECK_EQ(number(0.1), std::string("0.1"));
  CHECK_EQ(number(-2.5e-300), std::string("-2.5e-300"));
  CHECK_EQ(number(NAN), std::string("NaN"));
  CHECK_EQ(number(INFINITY), std::string("Infinity"));
  CHECK_EQ(number(-INFINITY), std::string("-Infinity"));
  CHECK_EQ(graphprobe::json::quote("a\"b\\\n\x01"), std::string("\"a\\\"b\\\\\\n\\u0001\""));
}

void calls_are_grouped_named_and_ordered_by_completion() {
  // Parent pre-hook, child (in, out), child again, parent out: children
  // complete first, and the k-th row of a place belongs to call k.
  const std::string parent = "Module.blk.Block.forward.{n}";
  const std::string child = "Module.blk.fc.Linear.forward.{n}";
  std::vector<TensorRow> rows = {
      row(parent, "input_args.0", 1, 0, 1, 1, 2),  row(child, "input_args.0", 1, 0, 1, 1, 2),
      row(child, "output.0", 2, 0, 2, 4, 2),       row(child, "input_args.0", 2, 0, 2, 4, 2),
      row(child, "output.0", 4, 0, 4, 16, 2),      row(parent, "output.0", 4, 0, 4, 16, 2),
  };
  graphprobe::DumpSummary summary;
  const std::string doc = graphprobe::build_dump_json("statistics", "L0", rows, &summary);
  CHECK_EQ(summary.entries, 3);
  CHECK_EQ(summary.tensors, 6);
  const auto c0 = doc.find("\"Module.blk.fc.Linear.forward.0\"");
  const auto c1 = doc.find("\"Module.blk.fc.Linear.forward.1\"");
  const auto p0 = doc.find("\"Module.blk.Block.forward.0\"");
  CHECK(c0 != std::string::npos && c1 != std::string::npos && p0 != std::string::npos);
  CHECK(c0 < c1 && c1 < p0);
  CHECK(contains(doc, "\"input_kwargs\": {}"));
  // Mean = sum / numel, Norm = sqrt(sumsq): 4/2 and 4.
  CHECK(contains(doc, "\"Mean\":2.0,\"Norm\":4.0"));
  CHECK(contains(doc, "\"task\": \"statistics\""));
  CHECK(contains(doc, "\"dump_data_dir\": null"));
}

void api_names_put_the_index_before_forward() {
  std::vector<TensorRow> rows = {row("Functional.linear.{n}.forward", "output.0", 1, 1, 1, 1, 1),
                                 row("Functional.linear.{n}.forward", "output.0", 1, 1, 1, 1, 1)};
  const std::string doc = graphprobe::build_dump_json("statistics", "L1", rows, nullptr);
  CHECK(contains(doc, "\"Functional.linear.0.forward\""));
  CHECK(contains(doc, "\"Functional.linear.1.forward\""));
  CHECK_EQ(graphprobe::entry_name("Module.a.A.forward.{n}", 7), std::string("Module.a.A.forward.7"));
}

void calls_with_different_tensor_counts_stay_apart() {
  // `x * 2` (one tensor input) then `a * b` (two): the second call's
  // input_args.1 must not be filed into the first call.
  const std::string mul = "Tensor.__mul__.{n}.forward";
  std::vector<TensorRow> rows = {row(mul, "input_args.0", 1, 1, 1, 1, 1), row(mul, "output.0", 2, 2, 2, 4, 1),
                                 row(mul, "input_args.0", 2, 2, 2, 4, 1), row(mul, "input_args.1", 3, 3, 3, 9, 1),
                                 row(mul, "output.0", 6, 6, 6, 36, 1)};
  graphprobe::DumpSummary summary;
  const std::string doc = graphprobe::build_dump_json("statistics", "L1", rows, &summary);
  CHECK_EQ(summary.entries, 2);
  const auto second = doc.find("\"Tensor.__mul__.1.forward\"");
  CHECK(second != std::string::npos);
  CHECK(doc.find("\"Max\":3.0") > second);  // input_args.1 belongs to the second call
}

void kinds_nesting_extras_and_write_counts() {
  TensorRow nan_row = row("E.{n}", "input_args.2.1", 0, 0, 0, 0, 3);
  nan_row.nan_count = 1;
  TensorRow ints = row("E.{n}", "input_args.0", 300, -125, 0, 0, 4);
  ints.kind = ValueKind::kIntegral;
  ints.dtype = "torch.int64";
  ints.extras = "input_args.1\x1fint\x1f" "3\x1einput_kwargs.scale\x1f" "float\x1f" "0.5\x1einput_kwargs.none\x1fNoneType\x1f";
  TensorRow flags = row("E.{n}", "input_kwargs.mask", 1, 0, 1, 1, 2);
  flags.kind = ValueKind::kBoolean;
  flags.writes = 3;
  TensorRow empty = row("E.{n}", "output.0", 0, 0, 0, 0, 0);
  empty.shape = {0, 3};
  const std::string doc = graphprobe::build_dump_json("statistics", "L0", {ints, nan_row, flags, empty}, nullptr);
  CHECK(contains(doc, "\"Max\":300,\"Min\":-125"));                       // integers stay integers
  CHECK(contains(doc, "{\"type\":\"int\",\"value\":3}"));                  // non-tensor leaf
  CHECK(contains(doc, "null,"));                                          // input_args[2][0] unknown
  CHECK(contains(doc, "\"Max\":NaN,\"Min\":NaN,\"Mean\":NaN,\"Norm\":NaN")); // NaN wins
  CHECK(contains(doc, "\"Max\":true,\"Min\":false,\"Mean\":null,\"Norm\":null"));
  CHECK(contains(doc, "\"write_count\":3"));
  CHECK(contains(doc, "\"shape\":[0,3],\"Max\":null"));
  CHECK(contains(doc, "{\"type\":\"float\",\"value\":0.5}"));
  CHECK(contains(doc, "{\"type\":\"NoneType\",\"value\":null}"));
  graphprobe::DumpSummary summary;
  graphprobe::build_dump_json("statistics", "L0", {flags}, &summary);
  CHECK_EQ(summary.overwritten.size(), size_t{1});
}

void run() {
  numbers();
  calls_are_grouped_named_and_ordered_by_completion();
  api_names_put_the_index_before_forward();
  calls_with_different_tensor_counts_stay_apart();
  kinds_nesting_extras_and_write_counts();
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run)
