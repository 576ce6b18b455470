// write_shortest (compare/shortest_double.h) against std::to_chars: the CSV's
// numbers must not change by one byte when the faster writer is used. Special
// classes, every digit count at every exponent around the fixed/scientific
// boundary, then tens of millions of random values (fixed seeds).
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include "compare/cell_text.h"
#include "compare/shortest_double.h"
#include "tests/check.h"

namespace gc = graphprobe::compare;

namespace {

int64_t checked = 0;
int mismatches = 0;

// Compares the two texts of v; prints the value (bits and %.17g) on a
// difference, the first 20 of them.
void same_as_to_chars(double v) {
  char want[64];
  const auto res = std::to_chars(want, want + sizeof(want), v);
  // Bytes past kShortestDoubleRoom must stay as they were.
  char got[gc::kShortestDoubleRoom + 8];
  std::memset(got, '#', sizeof(got));
  char* end = gc::write_shortest(got, v);
  ++checked;
  const std::string_view w(want, static_cast<size_t>(res.ptr - want));
  const std::string_view g(got, static_cast<size_t>(end - got));
  const bool past_room = std::string_view(got + gc::kShortestDoubleRoom, 8) != "########";
  if (w != g || g.size() > static_cast<size_t>(gc::kShortestDoubleMaxChars) || past_room) {
    ++mismatches;
    if (mismatches <= 20) {
      uint64_t bits;
      std::memcpy(&bits, &v, sizeof(bits));
      char value[64];
      std::snprintf(value, sizeof(value), "%.17g (bits 0x%016llx)", v, static_cast<unsigned long long>(bits));
      ::graphprobe::test::fail(__FILE__, __LINE__,
                               std::string("write_shortest(") + value + ") = '" + std::string(g) +
                                   "', std::to_chars = '" + std::string(w) + "'" +
                                   (past_room ? ", wrote past kShortestDoubleRoom" : ""));
    }
  }
}

// v, its two neighbours and -v; infinities (DBL_MAX's upper neighbour) are
// not write_shortest's to write.
void with_neighbours(double v) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const double x : {v, std::nextafter(v, inf), std::nextafter(v, -inf), -v}) {
    if (std::isfinite(x)) same_as_to_chars(x);
  }
}

void known_texts() {
  // The layout to_chars uses on libstdc++ 12, written out so that a reader
  // sees the rules: %f on a tie, at least two exponent digits.
  const std::pair<double, const char*> cases[] = {
      {0.0, "0"},          {-0.0, "-0"},        {100000.0, "1e+05"},    {123456.0, "123456"},
      {1e22, "1e+22"},     {5e-324, "5e-324"},  {1e-4, "1e-04"},        {0.001, "0.001"},
      {0.00012, "0.00012"}, {1e16, "1e+16"},    {1e-5, "1e-05"},        {1.5e300, "1.5e+300"},
      {1e7, "1e+07"},      {1.1e7, "1.1e+07"},  {1200000.0, "1200000"}, {10.0, "10"},
      {-2.5, "-2.5"},      {123456789012345678.0, "123456789012345680"},
      {DBL_MIN, "2.2250738585072014e-308"},     {-DBL_MAX, "-1.7976931348623157e+308"},
  };
  for (const auto& [v, text] : cases) {
    char buf[gc::kShortestDoubleRoom];
    CHECK_EQ(std::string(buf, gc::write_shortest(buf, v)), std::string(text));
    CHECK_EQ(gc::format_number(v), std::string(text));
  }
  // nan and inf stay the CSV's own words.
  CHECK_EQ(gc::format_number(std::nan("")), std::string("nan"));
  CHECK_EQ(gc::format_number(-std::numeric_limits<double>::infinity()), std::string("-inf"));
}

void special_classes() {
  same_as_to_chars(0.0);
  same_as_to_chars(-0.0);
  with_neighbours(std::numeric_limits<double>::denorm_min());  // 5e-324
  with_neighbours(std::nextafter(DBL_MIN, 0.0));                // largest subnormal
  with_neighbours(DBL_MIN);
  with_neighbours(DBL_MAX);
  // Every subnormal with a short bit pattern, and a few thousand spread out.
  for (uint64_t bits = 1; bits < 100000; ++bits) {
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    same_as_to_chars(v);
  }
  for (uint64_t bits = 1; bits < (1ull << 52); bits += (1ull << 52) / 4099) {
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    with_neighbours(v);
  }
  // Powers of ten as parsed from text, and those reached by multiplying.
  for (int e = -323; e <= 308; ++e) {
    char text[16];
    std::snprintf(text, sizeof(text), "1e%d", e);
    with_neighbours(std::strtod(text, nullptr));
    with_neighbours(std::pow(10.0, e));
  }
  // Integers, then powers of two and their neighbours.
  for (int i = 0; i <= 1000000; ++i) same_as_to_chars(static_cast<double>(i));
  for (int k = -1074; k <= 1023; ++k) with_neighbours(std::ldexp(1.0, k));
}

// For every digit count 1..17 and every decimal exponent from 1e-30 to 1e40,
// a few significands: the fixed/scientific choice changes along these lines
// (e.g. 1e-04 / 0.001, 123456 / 1e+05, 1.2345e+22 / 12345000000000000000000).
void fixed_scientific_boundary() {
  std::mt19937_64 rng(38);
  for (int n = 1; n <= 17; ++n) {
    for (int e = -30; e <= 40; ++e) {
      for (int k = 0; k < 40; ++k) {
        std::string digits;
        for (int i = 0; i < n; ++i) {
          const int d = static_cast<int>(rng() % 10);
          digits.push_back(static_cast<char>('0' + ((i == 0 || i == n - 1) && d == 0 ? 1 : d)));
        }
        std::string text = digits.substr(0, 1) + "." + digits.substr(1) + "e" + std::to_string(e);
        with_neighbours(std::strtod(text.c_str(), nullptr));
      }
    }
  }
}

void random_bit_patterns() {
  std::mt19937_64 rng(20261203);
  int64_t done = 0;
  while (done < 20000000) {
    const uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    if (!std::isfinite(v)) continue;
    same_as_to_chars(v);
    ++done;
  }
}

// The range of the statistics the CSV writes: log-uniform magnitudes, both
// signs; also float32 values widened to double, as most dumps' are.
void random_statistics() {
  std::mt19937_64 rng(1203);
  std::uniform_real_distribution<double> exponent(-8.0, 8.0);
  for (int i = 0; i < 20000000; ++i) {
    double v = std::pow(10.0, exponent(rng));
    if (rng() & 1) v = -v;
    same_as_to_chars(v);
  }
  std::uniform_real_distribution<double> linear(1e-8, 1e8);
  for (int i = 0; i < 2000000; ++i) {
    const double v = linear(rng);
    same_as_to_chars(v);
    same_as_to_chars(static_cast<double>(static_cast<float>(v)));
  }
  // Large integers: fixed form with padded zeros up to the tie at 1e+22.
  std::uniform_real_distribution<double> big(15.0, 24.0);
  for (int i = 0; i < 2000000; ++i) same_as_to_chars(std::pow(10.0, big(rng)));
}

void run_all() {
  known_texts();
  special_classes();
  fixed_scientific_boundary();
  random_bit_patterns();
  random_statistics();
  std::fprintf(stderr, "test_shortest_double: %lld values, %d differ from std::to_chars\n",
               static_cast<long long>(checked), mismatches);
  CHECK_EQ(mismatches, 0);
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run_all)
