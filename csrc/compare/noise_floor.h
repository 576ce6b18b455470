#pragma once
// The rounding noise two correct runs of one model may show, per dtype: the
// one table the first-divergence rule, the Python API, compare's summary and
// docs/formats.md ("Noise floor") all read. Torch-free.
//
// Three classes of statistic: aggregate ones (Mean, Norm: sums over every
// element, where rounding errors average out), extreme ones (Max, Min:
// one element, which a one-ulp difference in a fused or reordered kernel
// moves by a full ulp of its dtype) and the Sketch (an estimate of the
// relative L2 error of the whole tensor, stats/sketch.h). Values are relative errors (not %),
// as the scale-aware error of first_divergence.h measures them.

#include <string_view>
#include <vector>

namespace graphprobe::compare {

struct NoiseFloor {
  const char* name;      // "float32", "exact", ...: what compare prints
  const char* dtypes;    // the dtypes the row covers, for docs and --help
  double aggregate;      // Mean, Norm
  double extreme;        // Max, Min
  // Sketch: the relative L2 error of the whole tensor it estimates (every
  // element's rounding counts, none averages out, and none is singled out).
  double sketch;
  // One element's rounding, an ulp of the dtype: the floor of Mean, Norm and
  // the Sketch of a tensor whose Norm rests on a few elements is this over
  // the square root of their number (first_divergence.cpp, few_elements_floor).
  double element;
  // The smallest normal number: below it values are subnormal, with an
  // absolute spacing (this times `element`), not a relative one, and a
  // kernel that flushes them to zero moves them by their whole size.
  double smallest_normal;
};

// The table, most precise first; the last row ("exact") is integers, bool
// and non-tensor values: any difference counts.
const std::vector<NoiseFloor>& noise_floor_table();

// The row for a record's dtype as the dump writes it ("torch.bfloat16",
// numpy's "float16", "<class 'int'>"). A floating dtype the table does not
// name (float8_e8m0fnu, a backend's own) gets the float32 row; *assumed is
// then set, so that messages can say so.
const NoiseFloor& noise_floor_for(std::string_view dtype, bool is_tensor, bool* assumed = nullptr);

}  // namespace graphprobe::compare
