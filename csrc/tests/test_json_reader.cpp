// The JSON reader: valid documents, Python's non-finite literals, and errors
// with line:column on malformed or hostile input.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "compare/dump_reader.h"
#include "format/json_reader.h"
#include "format/json_writer.h"
#include "tests/check.h"

using graphprobe::json::parse;
using graphprobe::json::ParseError;
using graphprobe::json::Value;

namespace {

void valid_documents() {
  Value v = parse(R"( {"a": [1, -2.5, 3e2, true, false, null], "b": {"c": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}} )");
  CHECK(v.is_object());
  const Value* a = v.find("a");
  CHECK(a && a->is_array() && a->items().size() == 6);
  CHECK_EQ(a->items()[0].as_number(), 1.0);
  CHECK(a->items()[0].is_integer_literal());
  CHECK_EQ(a->items()[1].as_number(), -2.5);
  CHECK(!a->items()[1].is_integer_literal());
  CHECK_EQ(a->items()[2].as_number(), 300.0);
  CHECK(a->items()[3].as_bool() && !a->items()[4].as_bool() && a->items()[5].is_null());
  CHECK_EQ(v.find("b")->find("c")->as_string(), std::string("x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80"));
  CHECK(v.find("missing") == nullptr);
  // Object order is kept; duplicate keys: the last value at the first place, as in Python.
  Value d = parse(R"({"z": 1, "a": 2, "z": 3})");
  CHECK_EQ(d.keys().size(), size_t{2});
  CHECK_EQ(d.keys()[0], std::string("z"));
  CHECK_EQ(d.find("z")->as_number(), 3.0);
  CHECK(parse("[]").items().empty() && parse("{}").keys().empty());
  CHECK_EQ(parse("\xef\xbb\xbf 7").as_number(), 7.0);
}

void non_finite_literals() {
  Value v = parse("[NaN, Infinity, -Infinity, 1e999, -1e999, 1e-999]");
  const auto& i = v.items();
  CHECK(std::isnan(i[0].as_number()));
  CHECK(std::isinf(i[1].as_number()) && i[1].as_number() > 0);
  CHECK(std::isinf(i[2].as_number()) && i[2].as_number() < 0);
  CHECK(std::isinf(i[3].as_number()) && i[3].as_number() > 0);  // Python reads 1e999 as inf
  CHECK(std::isinf(i[4].as_number()) && i[4].as_number() < 0);
  CHECK_EQ(i[5].as_number(), 0.0);
  // What json_writer writes reads back.
  for (double x : {0.1, -3.0, 1e300, 5e-324, double(INFINITY), -double(INFINITY)})
    CHECK_EQ(parse(graphprobe::json::number(x)).as_number(), x);
}

void error_at(const std::string& text, size_t line, size_t col, const std::string& needle) {
  try {
    parse(text);
    graphprobe::test::fail(__FILE__, __LINE__, "no error for: " + text.substr(0, 40));
  } catch (const ParseError& e) {
    if (e.line() != line || e.column() != col || std::string(e.what()).find(needle) == std::string::npos)
      graphprobe::test::fail(__FILE__, __LINE__,
                             "for '" + text.substr(0, 40) + "' got " + e.what() + ", want " + std::to_string(line) +
                                 ":" + std::to_string(col) + " '" + needle + "'");
  }
}

void errors_have_positions() {
  error_at("", 1, 1, "expected a value, found end of input");
  error_at("{\n  \"a\": [1,]\n}", 2, 11, "expected a value, found ']'");
  error_at("{\"a\" 1}", 1, 6, "expected ':' after the key");
  error_at("{\"a\": 1,}", 1, 9, "expected a string key");
  error_at("{\"a\": 1 \"b\": 2}", 1, 9, "expected ',' or '}'");
  error_at("[1 2]", 1, 4, "expected ',' or ']'");
  error_at("[1] x", 1, 5, "expected end of document");
  error_at("01", 1, 2, "leading zeros");
  error_at("-", 1, 2, "expected a digit");
  error_at("1.", 1, 3, "expected a digit after '.'");
  error_at("1e+", 1, 4, "expected a digit in the exponent");
  error_at("nan", 1, 1, "expected a value");  // Python writes NaN, not nan
  error_at("Nan", 1, 1, "expected a value");
  error_at("-Inf", 1, 2, "expected a digit");
  error_at("tru", 1, 1, "expected a value");
  error_at("\"abc", 1, 5, "unterminated string");
  error_at("\"a\nb\"", 1, 3, "control character");
  error_at("\"\\x\"", 1, 3, "expected an escape character");
  error_at("\"\\u12G4\"", 1, 6, "hex digit");
  error_at("\"\\ud800\"", 1, 2, "unpaired surrogate");
  error_at("\"\\udc00\"", 1, 2, "unpaired low surrogate");
  error_at("\"\xff\"", 1, 2, "invalid UTF-8");
  error_at("\"\xc3\"", 1, 2, "invalid UTF-8");
  error_at("\"\xed\xa0\x80\"", 1, 2, "invalid UTF-8");  // encoded surrogate
  error_at(std::string(300, '['), 1, 257, "nesting deeper than 256 levels");
  error_at(std::string(300, '{'), 1, 2, "expected a string key");
  error_at("[\x01]", 1, 2, "found byte 0x01");
}

void depth_limit_is_configurable() {
  graphprobe::json::ParseOptions o;
  o.max_depth = 3;
  CHECK(parse("[[[1]]]", o).is_array());
  CHECK_THROWS(ParseError, parse("[[[[1]]]]", o), "nesting deeper than 3 levels");
  // Deep but valid input within the default limit.
  CHECK(parse(std::string(200, '[') + std::string(200, ']')).is_array());
}

void duplicate_keys_keep_the_last_value_at_the_first_place() {
  std::vector<graphprobe::json::DuplicateKey> dups;
  graphprobe::json::ParseOptions o;
  o.duplicates = &dups;
  const Value v = parse("{\"a\": 1, \"b\": 2,\n \"a\": 3}", o);
  CHECK_EQ(v.keys().size(), size_t{2});
  CHECK_EQ(v.keys()[0], std::string("a"));
  CHECK_EQ(v.items()[0].as_number(), 3.0);
  CHECK_EQ(v.find("a")->as_number(), 3.0);
  CHECK_EQ(dups.size(), size_t{1});
  CHECK_EQ(dups[0].key, std::string("a"));
  CHECK_EQ(dups[0].line, size_t{2});
  CHECK_EQ(dups[0].column, size_t{2});
  // Many keys: the hash index path.
  std::string big = "{";
  for (int i = 0; i < 100; ++i) big += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  big += "\"k7\": -1}";
  dups.clear();
  const Value w = parse(big, o);
  CHECK_EQ(w.keys().size(), size_t{100});
  CHECK_EQ(w.items()[7].as_number(), -1.0);
  CHECK_EQ(dups.size(), size_t{1});
}

void object_stream_reads_member_by_member() {
  graphprobe::json::ObjectStream in("{\"x\": [1, 2], \"data\": {\"e1\": {\"v\": 1}, \"e2\": null}, \"y\": 3}");
  CHECK(in.enter_object());
  std::string key;
  CHECK(in.next_key(key) && key == "x");
  CHECK_EQ(in.value().items().size(), size_t{2});
  CHECK(in.next_key(key) && key == "data");
  CHECK(in.enter_object());
  CHECK(in.next_key(key) && key == "e1");
  CHECK_EQ(in.value().find("v")->as_number(), 1.0);
  CHECK(in.next_key(key) && key == "e2");
  CHECK(in.value().is_null());
  CHECK(!in.next_key(key));
  CHECK(in.next_key(key) && key == "y");
  CHECK_EQ(in.value().as_number(), 3.0);
  CHECK(!in.next_key(key));
  in.finish();
  graphprobe::json::ObjectStream bad("{\"a\": 1 \"b\": 2}");
  CHECK(bad.enter_object());
  CHECK(bad.next_key(key));
  bad.value();
  CHECK_THROWS(ParseError, bad.next_key(key), "1:9: expected ',' or '}' in an object");
  graphprobe::json::ObjectStream trailing("{} x");
  CHECK(trailing.enter_object());
  CHECK(!trailing.next_key(key));
  CHECK_THROWS(ParseError, trailing.finish(), "expected end of document");
}

void hostile_input_never_crashes() {
  // Random mutations of a real document: each either parses or throws
  // ParseError; anything else (a crash, another exception) fails the test.
  const std::string seed =
      R"({"data": {"Module.a.Linear.forward.0": {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32",)"
      R"( "shape": [2, 3], "Max": NaN, "Min": -Infinity, "Mean": 1.5e-3, "Norm": 2, "requires_grad": false}]}}})";
  const std::string alphabet = "{}[]\",:\\0123456789.eE+-NaInfinitytruefalsenull \n\x80\xff";
  std::mt19937 rng(1234);
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = seed;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      const size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: s.erase(pos, 1 + rng() % 8); break;
        default: s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
      }
      if (s.empty()) s = "x";
    }
    try {
      parse(s);
      ++parsed;
    } catch (const ParseError&) {
      ++rejected;
    }
  }
  CHECK(rejected > 0);
  CHECK_EQ(parsed + rejected, 20000);
}

// A torn dump.json: a valid beginning, then a hole of 1 GiB (a sparse file:
// no disk, reads as NUL bytes). The reader must stop at the first NUL byte,
// naming the file and the offset, without reading the rest into memory
// (not hold the whole file, then fail at 1:1).
void torn_sparse_file_fails_fast() {
  const char* base = std::getenv("GRAPHPROBE_TEST_TMP");
  const std::string path = std::string(base ? base : "/tmp") + "/torn_dump.json";
  const std::string head = R"({"task": "statistics", "data": {)";
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(::write(fd, head.data(), head.size()) == static_cast<ssize_t>(head.size()));
    CHECK(::ftruncate(fd, off_t{1} << 30) == 0);
    ::close(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS(graphprobe::compare::DumpFormatError, graphprobe::compare::read_dump(path),
               path + ": byte " + std::to_string(head.size()) + " is a NUL byte");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(secs < 5.0);
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  CHECK(ru.ru_maxrss < 256 * 1024);  // KiB: far below the 1 GiB the file claims
  // All NUL from the first byte.
  CHECK(::truncate(path.c_str(), 0) == 0);
  CHECK(::truncate(path.c_str(), off_t{1} << 30) == 0);
  CHECK_THROWS(graphprobe::compare::DumpFormatError, graphprobe::compare::read_dump(path), ": byte 0 is a NUL byte");
  ::unlink(path.c_str());
}

void run_all() {
  valid_documents();
  non_finite_literals();
  errors_have_positions();
  depth_limit_is_configurable();
  duplicate_keys_keep_the_last_value_at_the_first_place();
  object_stream_reads_member_by_member();
  hostile_input_never_crashes();
  torn_sparse_file_fails_fast();
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run_all)
