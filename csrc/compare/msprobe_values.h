#pragma once
// A statistic as msprobe's compare sees it. Torch-free.
//
// msprobe (msprobe/core/compare/acc_compare.py, CalcStatsDiff, and the
// checkers in indicator_analysis/algorithm.py) compares statistics as the
// Python objects json.load gives, mostly through str(): 1 and 1.0 are
// different strings, True is not a number, a NaN becomes the string "Nan".
// These functions reproduce those tests on a TensorRecord's statistics, so
// that the rules built on them give msprobe's verdicts.

#include <string>

#include "compare/dump_reader.h"
#include "format/json_reader.h"

namespace graphprobe::compare {

// Python's repr(float): "1.0", "0.1", "1e-05", "1.5e+16", "inf", "nan".
std::string python_float_repr(double v);

// Python's repr() of a JSON value as json.load returns it ("[1, None, 'a']").
std::string python_repr(const json::Value& v);

// str() of statistic s as msprobe holds it (NaN as "Nan", None as "None").
std::string stat_str(const TensorRecord& r, int s);

// Whether statistic s of both records prints the same (msprobe's "equal"),
// without building the strings for numbers.
bool same_print(const TensorRecord& a, const TensorRecord& b, int s);

// A statistic's cell in the CSV: numbers in shortest form, anything else as
// msprobe writes it ("None", "True", the text).
std::string stat_cell(const TensorRecord& r, int s);

// msprobe's ValType of a statistic (CalcStatsDiff.classify).
enum class ValClass : uint8_t { kNum, kNan, kInf, kNegInf, kDevice, kNA, kOther };

// The class of statistic s; *number receives the value for kNum.
ValClass classify(const TensorRecord& r, int s, double* number);

// InfNanErrChecker's is_inf_or_nan on statistic s.
bool is_inf_or_nan(const TensorRecord& r, int s);

// Python's == on statistic s of both records (ParametersErrChecker):
// numbers by value, everything else by its string.
bool python_equal(const TensorRecord& a, const TensorRecord& b, int s);

}  // namespace graphprobe::compare
