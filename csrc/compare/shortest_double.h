#pragma once
// The shortest round-trip text of a double, byte-identical to
// std::to_chars(first, last, v) (C++17 plain format: %f or %e style, whichever
// is shorter, %f on a tie). Torch-free.
//
// Why not std::to_chars: the compare's CSV writes a dozen numbers a row, and
// libstdc++'s to_chars (Ryu) was about half of the CSV step (issue #38). This
// takes the digits from Dragonbox (csrc/third_party/dragonbox) and writes them
// in to_chars' layout; csrc/tests/test_shortest_double.cpp checks it against
// std::to_chars on special values and tens of millions of random ones.

namespace graphprobe::compare {

// Longest text: "-2.2250738585072014e-308" (24 characters); fixed forms are
// chosen only when not longer than the scientific one.
inline constexpr int kShortestDoubleMaxChars = 24;
// Bytes write_shortest may write at `out`, past the text's end too: it copies
// the digits in fixed-size blocks (no loop, no call per number).
inline constexpr int kShortestDoubleRoom = 34;

// Writes finite `v` at `out` (room for kShortestDoubleRoom bytes) and returns
// the text's end. NaN and infinity are the caller's (to_chars spells them
// "nan", "inf", the CSV keeps its own words).
char* write_shortest(char* out, double v);

}  // namespace graphprobe::compare
