#include "compare/shortest_double.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "third_party/dragonbox/dragonbox.h"

namespace graphprobe::compare {

namespace {

// "00".."99": two digits per table read.
constexpr char kDigitPairs[] =
    "00010203040506070809"
    "10111213141516171819"
    "20212223242526272829"
    "30313233343536373839"
    "40414243444546474849"
    "50515253545556575859"
    "60616263646566676869"
    "70717273747576777879"
    "80818283848586878889"
    "90919293949596979899";

constexpr uint64_t kPow10[] = {
    1ull,
    10ull,
    100ull,
    1000ull,
    10000ull,
    100000ull,
    1000000ull,
    10000000ull,
    100000000ull,
    1000000000ull,
    10000000000ull,
    100000000000ull,
    1000000000000ull,
    10000000000000ull,
    100000000000000ull,
    1000000000000000ull,
    10000000000000000ull,
    100000000000000000ull,
    1000000000000000000ull,
    10000000000000000000ull,
};

// Number of decimal digits of s > 0: an estimate from the bit length
// (log10(2) ~ 1233/4096), corrected by one comparison.
int digit_count(uint64_t s) {
  const int bits = 64 - __builtin_clzll(s);
  const int guess = (bits * 1233) >> 12;
  return guess + (s >= kPow10[guess] ? 1 : 0);
}

void write_pair(char* at, uint32_t two_digits) { std::memcpy(at, kDigitPairs + 2 * two_digits, 2); }

// Writes exactly 8 digits of s < 10^8 at `at`, leading zeros included. The
// four pairs come from 32-bit products that do not wait on each other.
void write_8_digits(char* at, uint32_t s) {
  const uint32_t high = s / 10000;
  const uint32_t low = s % 10000;
  write_pair(at, high / 100);
  write_pair(at + 2, high % 100);
  write_pair(at + 4, low / 100);
  write_pair(at + 6, low % 100);
}

// The 17 digits of s < 10^17 (every shortest significand of a double), with
// leading zeros, end at text[24]; the n significant ones start at
// first(n). No loop over the digits and no branch on their count: the count
// changes from number to number, and a mispredicted loop exit cost more than
// writing a few zeros. The 16-byte copies out of this buffer wait on its
// 2-byte stores (no store forwarding; perf shows it), yet a version that kept
// the digits in 64-bit words in registers, shifted into place, was slower:
// 42 vs 36 ns a number alone, and no faster in the CSV step. text[24..48) is
// set so that the fixed-size copies below read set bytes.
struct Digits {
  char text[48];
  explicit Digits(uint64_t s) {
    const uint64_t high = s / 100000000;  // < 10^9
    const auto low = static_cast<uint32_t>(s - high * 100000000);
    const auto top = static_cast<uint32_t>(high / 100000000);  // 0..9
    const auto middle = static_cast<uint32_t>(high - uint64_t{top} * 100000000);
    text[7] = static_cast<char>('0' + top);
    write_8_digits(text + 8, middle);
    write_8_digits(text + 16, low);
    std::memset(text + 24, '0', 24);
  }
  const char* first(int n) const { return text + 24 - n; }
};

// Writes whole v, 2^53 <= v < 10^22 (the whole numbers %f is chosen for),
// exactly: its 53-bit significand shifted left. Rare in statistics: kept
// simple.
char* write_whole(char* out, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const int shift = static_cast<int>(bits >> 52) - 1075;
  unsigned __int128 whole = static_cast<unsigned __int128>((bits & ((1ull << 52) - 1)) | (1ull << 52)) << shift;
  char digits[40];
  char* p = digits + sizeof(digits);
  do {
    *--p = static_cast<char>('0' + static_cast<int>(whole % 10));
    whole /= 10;
  } while (whole != 0);
  const size_t len = static_cast<size_t>(digits + sizeof(digits) - p);
  std::memcpy(out, p, len);
  return out + len;
}

}  // namespace

char* write_shortest(char* out, double v) {
  if (v == 0) {
    if (std::signbit(v)) *out++ = '-';
    *out++ = '0';
    return out;
  }
  // Shortest digits that read back as v, the nearest of them to v, ties to
  // even: what std::to_chars (Ryu) picks too (the test checks it). Trailing
  // zeros removed: v = significand * 10^exponent with the fewest digits.
  const auto dec = jkj::dragonbox::to_decimal(v);
  if (dec.is_negative) *out++ = '-';
  const uint64_t sig = dec.significand;
  const int exp = dec.exponent;
  const int n = digit_count(sig);
  const int sci_exp = exp + n - 1;

  // The plain format is %f when not longer than %e (%e: the digits, a point
  // when more than one, "e+" and at least two exponent digits). Comparing
  // the two lengths comes down to this range of exp, as libstdc++ writes it.
  int lower_bound = -(n + 3);
  int upper_bound = 5;
  if (n == 1) ++lower_bound, --upper_bound;
  const bool fixed = exp >= lower_bound && exp <= upper_bound;
  const Digits digits(sig);
  const char* d = digits.first(n);
  // Below, fixed-size copies write past the text's end (up to 33 bytes from
  // `out`: kShortestDoubleRoom); the caller's end is the returned pointer.
  if (fixed) {
    if (exp >= 0) {
      // A whole number, which %f writes exactly: the shortest digits and
      // zeros while v < 2^53 (then they are v), else v's own digits
      // (1e17 + 16 -> "100000000000000016", not "100000000000000020").
      if (std::fabs(v) >= 9007199254740992.0) return write_whole(out, std::fabs(v));
      std::memcpy(out, d, 17);
      std::memset(out + n, '0', 8);  // exp <= 5
      return out + n + exp;
    }
    const int int_digits = n + exp;
    if (int_digits > 0) {
      // The point inside the digits (1 <= int_digits <= 16).
      std::memcpy(out, d, 16);
      out[int_digits] = '.';
      std::memcpy(out + int_digits + 1, d + int_digits, 16);
      return out + n + 1;
    }
    // "0." then -(n + exp) <= 3 zeros, then the digits.
    const int zeros = -int_digits;
    std::memcpy(out, "0.000", 5);
    std::memcpy(out + 2 + zeros, d, 17);
    return out + 2 + zeros + n;
  }

  // Scientific: d[.ddd]e±XX[X].
  out[0] = d[0];
  out[1] = '.';
  std::memcpy(out + 2, d + 1, 16);
  out += n > 1 ? n + 1 : 1;
  out[0] = 'e';
  out[1] = sci_exp < 0 ? '-' : '+';
  const int abs_sci = sci_exp < 0 ? -sci_exp : sci_exp;
  if (abs_sci >= 100) {
    out[2] = static_cast<char>('0' + abs_sci / 100);
    write_pair(out + 3, static_cast<uint32_t>(abs_sci % 100));
    return out + 5;
  }
  write_pair(out + 2, static_cast<uint32_t>(abs_sci));
  return out + 4;
}

}  // namespace graphprobe::compare
