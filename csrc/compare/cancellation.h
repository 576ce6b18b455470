#pragma once
// The scale a record is expected to have from what produced it, for records
// far smaller than that: cancellation residues. Torch-free.
//
// A gradient that is zero in theory -- a key projection's bias (softmax
// ignores a constant shift of the logits), the input of a normalisation
// under a loss that its scale does not change -- is computed as rounding
// residue, ~1e-7 of the values it was summed from; eager and compiled code
// leave different residues (20-60 % of their own size). Judged against its
// own RMS such a record is a "divergence" thousands of times beyond the
// floor; judged against the scale of what produced it, it is rounding.
//
// Expected RMS, from the bench's records (docs/formats.md, "Cancellation"):
//  * a backward entry's outputs (gradients of the forward call's inputs):
//    the largest RMS of its inputs (gradients of the outputs, at their own
//    size: a call that passes a residue on makes no cancellation of its
//    own) times the forward call's gain for that input, RMS(outputs) /
//    RMS(the input), which a linear map, a normalisation or a softmax shares
//    with its backward to within sqrt(fan_out / fan_in); for the gradient of
//    a weight or bias taken as an input (F.linear at L1/mix), the
//    parameters_grad formula below;
//  * a {module}.parameters_grad entry's records: sqrt(T) times the expected
//    RMS of the gradient of the module's output (its first backward call's
//    input), times the RMS of its first forward call's input for a matrix
//    (T = numel(gradient) / rows of the parameter), or alone for a vector
//    (T = numel(gradient) / numel(parameter)): a sum of T products of random
//    sign; for a module with no backward call recorded (its parameters
//    taken directly by another call), the largest bench RMS of the same
//    parameter, of the same shape, of the other modules under the same
//    parent (its siblings' gradients);
//  * a backward entry's input (the gradient of the forward call's output j),
//    where autograd summed it from several consumers of that tensor: the
//    largest RMS of those contributions (the consumers' backward outputs for
//    the inputs whose bench record is that tensor's: record_fingerprint.h);
//  * an input row whose records on both sides equal, bit for bit, those of
//    an earlier row given an expected RMS (record_fingerprint.h: the same
//    tensor, recorded again as the next call's input): that row's.
// An expected RMS is kept where it exceeds `margin` (8) times the record's
// own RMS -- a residue -- and is then the scale its errors are measured
// against, whole; everything else gets 0 (its own RMS rules).

#include <vector>

#include "compare/result.h"

namespace graphprobe::compare {

// One value per row of result.rows (0: judged on its own RMS). With
// `sum_condition`, also per row of a {module}.parameters_grad entry (0
// elsewhere; left empty where no such row has one): T times the sum's expected scale above over the record's own
// RMS -- sqrt(T) times the sum's condition number sum|terms| / |sum|,
// estimated as sqrt(T) x that scale / RMS. An accumulator rounds each of T
// partial sums, so two correct kernels' results differ by about its ulp
// times this (first_divergence.cpp).
std::vector<double> expected_rms_from_producers(const CompareResult& result, double margin,
                                                std::vector<double>* sum_condition = nullptr);

// Per row of result.rows: a parameter row ({entry}.parameters.{name}) of a
// module whose {module}.parameters_grad.* row {name} in the same dump was
// given an expected RMS (`expected`, from the function above): a parameter
// whose gradient is zero in theory. An optimizer moves it by its rounding
// alone (Adam: +-lr an element whatever the gradient's size), so eager's and
// compiled copies drift apart with nothing wrong.
std::vector<bool> residue_gradient_parameters(const CompareResult& result, const std::vector<double>& expected);

}  // namespace graphprobe::compare
