// same_shape and shape_is_scalar (compare/cell_text.h) against the text
// they stand for: shape_of(a) == shape_of(b), and shape_of(r) == "[]".
#include <cstdint>
#include <string>
#include <vector>

#include "compare/cell_text.h"
#include "tests/check.h"

namespace gc = graphprobe::compare;

namespace {

void run_all() {
  std::vector<gc::TensorRecord> records;
  gc::RecordArena arena;  // holds the records' sizes, as a Dump's does
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {0}, {1}, {8}, {8, 4096}, {4096, 8}, {8, 4096, 1}, {-1}, {1, 1}, {10}, {1, 0}, {123456789012LL}};
  for (const auto& s : shapes) {
    gc::TensorRecord r;
    r.shape = arena.keep(s);
    records.push_back(r);
  }
  // Shape texts: they replace the sizes, including ones that read like a
  // size list ("[]", "[8, 4096]").
  for (const char* text : {"N/A", "(3,)", "[]", "[8, 4096]", "[8]", "slice(1, 2, None)"}) {
    gc::TensorRecord r;
    r.shape_text = text;
    records.push_back(r);
    gc::TensorRecord with_sizes;  // a text with sizes beside it: the text counts
    with_sizes.shape = arena.keep({8, 4096});
    with_sizes.shape_text = text;
    records.push_back(with_sizes);
  }
  int pairs = 0;
  for (const auto& a : records) {
    CHECK_EQ(gc::shape_is_scalar(a), gc::shape_of(a) == "[]");
    for (const auto& b : records) {
      ++pairs;
      if (gc::same_shape(a, b) != (gc::shape_of(a) == gc::shape_of(b)))
        ::graphprobe::test::fail(__FILE__, __LINE__, "same_shape(" + gc::shape_of(a) + ", " + gc::shape_of(b) + ")");
    }
  }
  CHECK(pairs == 24 * 24);
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run_all)
