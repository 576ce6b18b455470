#pragma once
// Where the target starts to differ: graphprobe's first divergence (issue
// 25; docs/formats.md, "First divergence"). msprobe's Result column is not
// involved: it keeps msprobe's rules. Torch-free.
//
// 1. Each matched row gets a scale-aware error per statistic (RowError::e)
//    and z = max over statistics of e / noise floor of the bench dtype
//    (noise_floor.h; Max/Min use the extreme floor, Mean/Norm the aggregate
//    one; every floor x floor_scale). z > 1: beyond rounding noise. A hard
//    difference (dtype, shape, a non-tensor value, target NaN/inf while the
//    bench is finite) is z = inf; a Python float is weighed against the
//    float32 floor. e and z are also kept per class of statistic (aggregate
//    Mean/Norm, extreme Max/Min): the comparisons below are made within one.
// 2. An entry's rows are its inputs (arguments), its parameters
//    ({entry}.parameters.*) and its outputs. Target entries are walked in
//    dump order (calls as they complete, children before parents); the first
//    one where any of these holds is the first divergence:
//    (a) a parameter row has z > 1 (a differing parameter is a cause:
//        nothing upstream produced it);
//    (b) an output row has e > R x the largest e of the entry's inputs and
//        parameters + its floor (so z > 1);
//    (c) an input row has e > R x U + its floor, U the largest e over every
//        matched row of the earlier entries: the error came from code that
//        is not recorded (or not matched) between the last agreeing record
//        and this entry.
//    e and z are compared within one class of statistic; the floor of an
//    input or output is at least the coarsest floating floor of the data
//    so far, the entry's inputs included (float32 values computed from
//    bfloat16 data carry bfloat16 rounding).
//    R = divergence_ratio. Unmatched rows take no part, nor do integer/bool
//    outputs of an entry whose inputs or parameters differ at all (a flipped
//    argmax is rounding, not a cause).
// The rows of the entry found get first_divergence = true; every matched
// row gets its z.

#include <array>
#include <optional>
#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// The error of one matched pair of records. floor_scale multiplies the
// floor; at_least (data rows: the floor of the data upstream) replaces the
// record's own floating floor when coarser.
// With both sketches (Dump::sketches) the Sketch is judged too;
// produced_from_rms > the bench's own RMS measures the errors against it
// (cancellation, below).
RowError row_error(const TensorRecord& target, const TensorRecord& bench, double floor_scale,
                   const NoiseFloor* at_least = nullptr, const std::array<double, 4>* target_sketch = nullptr,
                   const std::array<double, 4>* bench_sketch = nullptr, double produced_from_rms = 0);

// row_error of matched row `index` of a result after find_first_divergence,
// as it measured it (result.data_floors, result.floor_scale).
RowError row_error_of(const CompareResult& result, size_t index);

// Fills rows[i].z, result.divergence, result.first_divergence, result.noise
// and result.floors_used; marks the rows of the entry found.
void find_first_divergence(CompareResult& result, const Thresholds& t);

// Fills result.coverage from the dumps and the matched rows.
void measure_coverage(CompareResult& result);

// "2e-6", "0.1", "30": short numbers for messages.
std::string short_number(double v);

}  // namespace graphprobe::compare
