#pragma once
// Minimal test macros: a failed check prints file:line and is counted;
// GRAPHPROBE_TEST_MAIN returns non-zero when any check failed.

#include <cmath>
#include <iostream>
#include <string>

namespace graphprobe::test {
inline int& failures() {
  static int n = 0;
  return n;
}
inline void fail(const char* file, int line, const std::string& what) {
  ++failures();
  std::cerr << file << ":" << line << ": check failed: " << what << "\n";
}
}  // namespace graphprobe::test

#define CHECK(cond) \
  do { \
    if (!(cond)) ::graphprobe::test::fail(__FILE__, __LINE__, #cond); \
  } while (0)

#define CHECK_EQ(a, b) \
  do { \
    const auto& va_ = (a); \
    const auto& vb_ = (b); \
    if (!(va_ == vb_)) { \
      std::ostringstream os_; \
      os_ << #a " == " #b " (" << va_ << " vs " << vb_ << ")"; \
      ::graphprobe::test::fail(__FILE__, __LINE__, os_.str()); \
    } \
  } while (0)

#define CHECK_NEAR(a, b, tol) \
  do { \
    const double va_ = (a), vb_ = (b); \
    if (!(std::fabs(va_ - vb_) <= (tol))) { \
      std::ostringstream os_; \
      os_ << #a " ~= " #b " (" << va_ << " vs " << vb_ << ")"; \
      ::graphprobe::test::fail(__FILE__, __LINE__, os_.str()); \
    } \
  } while (0)

// Runs `statement`, which must throw E; `needle` must be in what().
#define CHECK_THROWS(E, statement, needle) \
  do { \
    bool thrown_ = false; \
    try { \
      statement; \
    } catch (const E& e_) { \
      thrown_ = true; \
      if (std::string(e_.what()).find(needle) == std::string::npos) \
        ::graphprobe::test::fail(__FILE__, __LINE__, std::string("message '") + e_.what() + "' lacks '" + (needle) + "'"); \
    } \
    if (!thrown_) ::graphprobe::test::fail(__FILE__, __LINE__, #statement " did not throw " #E); \
  } while (0)

#define GRAPHPROBE_TEST_MAIN(body) \
  int main() { \
    body(); \
    const int n_ = ::graphprobe::test::failures(); \
    std::cerr << (n_ ? std::to_string(n_) + " check(s) failed\n" : std::string("all checks passed\n")); \
    return n_ ? 1 : 0; \
  }

#include <sstream>
