// dump.json writing: naming helpers, nesting, values, kinds and write counts.
#include <cmath>
#include <string>

#include "check.h"
#include "format/dump_json.h"
#include "format/json_writer.h"
#include "record/call_record.h"

using graphprobe::TensorRow;
using graphprobe::ValueKind;

namespace {

TensorRow row(graphprobe::Place place, double max, double min, double sum, double sumsq, int64_t numel) {
  TensorRow r;
  r.place = std::move(place);
  r.dtype = "torch.float32";
  r.shape = {numel};
  r.numel = numel;
  r.max = max;
  r.min = min;
  r.sum = sum;
  r.sumsq = sumsq;
  return r;
}

graphprobe::Leaf leaf(graphprobe::Place place, int64_t order, const std::string& type, graphprobe::Leaf::Kind kind,
                      const std::string& text = "", double f = 0) {
  graphprobe::Leaf l;
  l.place = std::move(place);
  l.order = order;
  l.type = type;
  l.kind = kind;
  l.text = text;
  l.f = f;
  return l;
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

void calls_are_written_in_the_given_order() {
  graphprobe::CallRecord child{"Module.blk.fc.Linear.forward.0", {row({"input_args", "0"}, 1, 0, 1, 1, 2)}, {}};
  graphprobe::CallRecord parent{"Module.blk.Block.forward.0", {row({"output", "0"}, 4, 0, 4, 16, 2)}, {}};
  const std::string doc = graphprobe::build_dump_json("statistics", "L0", {child, parent});
  const graphprobe::DumpSummary summary = graphprobe::summarize({child, parent});
  CHECK_EQ(summary.entries, 2);
  CHECK_EQ(summary.tensors, 2);
  CHECK(doc.find("\"Module.blk.fc.Linear.forward.0\"") < doc.find("\"Module.blk.Block.forward.0\""));
  CHECK(contains(doc, "\"input_kwargs\": {}"));
  // Mean = sum / numel, Norm = sqrt(sumsq): 4/2 and 4.
  CHECK(contains(doc, "\"Mean\":2.0,\"Norm\":4.0"));
  CHECK(contains(doc, "\"task\": \"statistics\""));
  CHECK(contains(doc, "\"dump_data_dir\": null"));
  CHECK_EQ(graphprobe::entry_name("Module.a.A.forward.{n}", 7), std::string("Module.a.A.forward.7"));
  CHECK_EQ(graphprobe::entry_name("Functional.linear.{n}.forward", 2), std::string("Functional.linear.2.forward"));
  CHECK_EQ(graphprobe::io_name({"input_kwargs", "mask"}), std::string("input.mask"));
  CHECK_EQ(graphprobe::io_name({"output", "0", "1"}), std::string("output.0.1"));
}

void kinds_nesting_leaves_and_write_counts() {
  using Kind = graphprobe::Leaf::Kind;
  TensorRow nan_row = row({"input_args", "2", "1"}, 0, 0, 0, 0, 3);
  nan_row.nan_count = 1;
  nan_row.order = 2;
  TensorRow ints = row({"input_args", "0"}, 300, -125, 0, 0, 4);
  ints.kind = ValueKind::kIntegral;
  ints.dtype = "torch.int64";
  TensorRow flags = row({"input_kwargs", "mask"}, 1, 0, 1, 1, 2);
  flags.kind = ValueKind::kBoolean;
  flags.writes = 3;
  flags.order = 5;
  TensorRow empty = row({"output", "0"}, 0, 0, 0, 0, 0);
  empty.shape = {0, 3};
  graphprobe::CallRecord call{"E.0", {ints, nan_row, flags, empty},
                              {leaf({"input_args", "1"}, 1, "int", Kind::kInt, "123456789012345678901234567890"),
                               leaf({"input_kwargs", "scale"}, 3, "float", Kind::kFloat, "", 0.5),
                               leaf({"input_kwargs", "none"}, 4, "NoneType", Kind::kNone),
                               leaf({"input_kwargs", "a.b"}, 6, "dtype", Kind::kOpaque)}};
  const std::string doc = graphprobe::build_dump_json("statistics", "L0", {call});
  CHECK(contains(doc, "\"Max\":300,\"Min\":-125"));                        // integers stay integers
  CHECK(contains(doc, "{\"type\":\"int\",\"value\":123456789012345678901234567890}"));  // any size
  CHECK(contains(doc, "null,"));                                           // input_args[2][0] unknown
  CHECK(contains(doc, "\"Max\":NaN,\"Min\":NaN,\"Mean\":NaN,\"Norm\":NaN"));  // NaN wins
  CHECK(contains(doc, "\"Max\":true,\"Min\":false,\"Mean\":null,\"Norm\":null"));
  CHECK(contains(doc, "\"write_count\":3"));
  CHECK(contains(doc, "\"shape\":[0,3],\"Max\":null"));
  CHECK(contains(doc, "{\"type\":\"float\",\"value\":0.5}"));
  CHECK(contains(doc, "\"none\": null"));                              // None as msprobe: null
  CHECK(!contains(doc, "NoneType"));
  CHECK(contains(doc, "\"a.b\": {\"type\":\"dtype\"}"));  // a dotted key stays one key
  // Keyword inputs keep argument order: scale, none, mask, a.b.
  const auto scale = doc.find("\"scale\""), none = doc.find("\"none\""), mask = doc.find("\"mask\"");
  CHECK(scale < none && none < mask && mask < doc.find("\"a.b\""));
  const graphprobe::DumpSummary summary = graphprobe::summarize({graphprobe::CallRecord{"E.0", {flags}, {}}});
  CHECK_EQ(summary.overwritten.size(), size_t{1});
}

void a_dict_with_index_like_keys_is_still_a_dict() {
  graphprobe::CallRecord call{"E.0", {row({"output", "0", "0"}, 1, 1, 1, 1, 1), row({"output", "0", "x"}, 2, 2, 2, 4, 1)},
                              {}};
  call.tensors[1].order = 1;
  const std::string doc = graphprobe::build_dump_json("statistics", "L0", {call});
  CHECK(contains(doc, "\"0\": {"));
  CHECK(contains(doc, "\"x\": {"));
}

// summary_mode "md5": 16 lowercase hex digits (leading zeros kept) after
// requires_grad, null where requested without a value, no key otherwise.
void checksums_are_sixteen_hex_digits_or_null() {
  TensorRow hashed = row({"input_args", "0"}, 1, 0, 1, 1, 2);
  hashed.md5_requested = true;
  hashed.md5 = 0x00ab00000000cdefULL;
  TensorRow empty = row({"input_args", "1"}, 0, 0, 0, 0, 0);
  empty.order = 1;
  empty.md5_requested = true;
  TensorRow plain = row({"output", "0"}, 1, 1, 1, 1, 1);
  const std::string doc = graphprobe::build_dump_json("statistics", "L0", {{"E.0", {hashed, empty, plain}, {}}});
  CHECK(contains(doc, "\"requires_grad\":false,\"md5\":\"00ab00000000cdef\""));
  CHECK(contains(doc, "\"md5\":null"));
  size_t n = 0;
  for (size_t at = doc.find("\"md5\""); at != std::string::npos; at = doc.find("\"md5\"", at + 1)) ++n;
  CHECK_EQ(n, size_t{2});
}

void run() {
  numbers();
  checksums_are_sixteen_hex_digits_or_null();
  calls_are_written_in_the_given_order();
  kinds_nesting_leaves_and_write_counts();
  a_dict_with_index_like_keys_is_still_a_dict();
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run)
