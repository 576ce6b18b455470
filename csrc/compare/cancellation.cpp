#include "compare/cancellation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>

#include "compare/entry_ranges.h"

namespace graphprobe::compare {
namespace {

bool floating_tensor(const TensorRecord& r) {
  if (!r.is_tensor || !r.shape_text.empty()) return false;
  return r.dtype.find("float") != std::string::npos || r.dtype.find("half") != std::string::npos ||
         r.dtype.find("double") != std::string::npos;
}

double numel(const TensorRecord& r) {
  double n = 1;
  for (int64_t d : r.shape) n *= static_cast<double>(d);
  return n;
}

double rms(const TensorRecord& r) {
  const double n = numel(r);
  const OptDouble& norm = r.stats[kStatNorm];
  return norm && std::isfinite(*norm) && n > 0 ? std::fabs(*norm) / std::sqrt(n) : 0.0;
}

// The bench record's identity for "the same tensor recorded again": dtype,
// shape and the four statistics' bits.
std::string fingerprint(const TensorRecord& b) {
  std::string key = b.dtype;
  key.push_back('|');
  for (int64_t d : b.shape) key.append(reinterpret_cast<const char*>(&d), sizeof(d));
  key.push_back('|');
  for (int s = 0; s < kNumStats; ++s) {
    const double v = b.stats[s] ? *b.stats[s] : std::nan("");
    key.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  return key;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "X.backward.3" -> "X.forward.3" (modules); "X.3.backward" -> "X.3.forward"
// (APIs); "" for any other name.
std::string forward_of(std::string_view name) {
  if (ends_with(name, ".backward")) return std::string(name.substr(0, name.size() - 9)) + ".forward";
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == name.size()) return "";
  const std::string_view n = name.substr(dot + 1);
  if (!std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) return "";
  const std::string_view head = name.substr(0, dot);
  if (!ends_with(head, ".backward")) return "";
  return std::string(head.substr(0, head.size() - 9)) + ".forward." + std::string(n);
}

// "Module.fc.Linear.parameters_grad.0" (or without ".0") -> "Module.fc.Linear".
std::string module_of_parameters_grad(std::string_view name) {
  const size_t at = name.rfind(".parameters_grad");
  if (at == std::string_view::npos) return "";
  const std::string_view rest = name.substr(at + 16);
  if (!rest.empty() && (rest[0] != '.' || !std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; })))
    return "";
  return std::string(name.substr(0, at));
}

}  // namespace

std::vector<double> expected_rms_from_producers(const CompareResult& result, double margin) {
  const Dump& target = result.target;
  const Dump& bench = result.bench;
  const auto& rows = result.rows;
  std::vector<double> expected(rows.size(), 0.0);
  const auto ranges = entry_ranges(target, rows);
  std::unordered_map<std::string_view, size_t> range_of;  // entry name -> index into ranges
  range_of.reserve(ranges.size());
  for (size_t k = 0; k < ranges.size(); ++k)
    range_of.emplace(target.entries[target.rows[static_cast<size_t>(rows[ranges[k].first].target)].entry], k);

  auto matched_bench = [&](size_t i) -> const TensorRecord* {
    if (rows[i].match != MatchKind::kMatched) return nullptr;
    const TensorRecord& b = bench.rows[static_cast<size_t>(rows[i].bench)];
    return floating_tensor(b) ? &b : nullptr;
  };
  auto role = [&](size_t i) { return target.rows[static_cast<size_t>(rows[i].target)].role; };
  auto is_param = [&](size_t i) {
    const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
    return t.suffix(target.entries).substr(0, 11) == "parameters.";
  };
  // The largest RMS of an entry's floating rows of one role (parameters
  // left out); with `own`, each row's expected RMS where larger.
  auto peak_rms = [&](size_t k, Role r, bool own) {
    double best = 0;
    for (size_t i = ranges[k].first; i < ranges[k].second; ++i) {
      const TensorRecord* b = matched_bench(i);
      if (b == nullptr || role(i) != r || is_param(i)) continue;
      best = std::max(best, own ? std::max(rms(*b), expected[i] * margin) : rms(*b));
    }
    return best;
  };
  auto range_named = [&](const std::string& name) -> const std::pair<size_t, size_t>* {
    if (name.empty()) return nullptr;
    const auto it = range_of.find(name);
    return it == range_of.end() ? nullptr : &ranges[it->second];
  };
  // Expected RMS (before the margin) of rows already given one, by the
  // bench record's fingerprint.
  std::unordered_map<std::string, double> carried;
  auto give = [&](size_t i, const TensorRecord& b, double want) {
    if (want / margin <= rms(b)) return;
    expected[i] = want / margin;
    carried[fingerprint(b)] = want;
  };

  for (size_t k = 0; k < ranges.size(); ++k) {
    const auto [begin, end] = ranges[k];
    const std::string& name = target.entries[target.rows[static_cast<size_t>(rows[begin].target)].entry];
    if (!carried.empty())
      for (size_t i = begin; i < end; ++i) {
        const TensorRecord* b = matched_bench(i);
        if (b == nullptr || role(i) != Role::kInput) continue;
        const auto it = carried.find(fingerprint(*b));
        if (it != carried.end()) give(i, *b, it->second);
      }
    if (const auto* fwd = range_named(forward_of(name))) {
      const size_t f = static_cast<size_t>(fwd - ranges.data());
      const double in = peak_rms(f, Role::kInput, false), out = peak_rms(f, Role::kOutput, false);
      const double gradient_in = peak_rms(k, Role::kInput, true);
      if (in > 0 && out > 0 && gradient_in > 0)
        for (size_t i = begin; i < end; ++i)
          if (const TensorRecord* b = matched_bench(i); b && role(i) == Role::kOutput)
            give(i, *b, gradient_in * out / in);
      continue;
    }
    const std::string module = module_of_parameters_grad(name);
    if (module.empty()) continue;
    const auto* bwd = range_named(module + ".backward.0");
    const auto* fwd = range_named(module + ".forward.0");
    if (bwd == nullptr) continue;
    double gradient = 0, gradient_numel = 0;
    for (size_t i = bwd->first; i < bwd->second; ++i) {
      const TensorRecord* b = matched_bench(i);
      if (b == nullptr || role(i) != Role::kInput) continue;
      const double g = std::max(rms(*b), expected[i] * margin);
      if (g > gradient) gradient = g, gradient_numel = numel(*b);
    }
    const double x = fwd ? peak_rms(static_cast<size_t>(fwd - ranges.data()), Role::kInput, false) : 0.0;
    if (gradient == 0) continue;
    for (size_t i = begin; i < end; ++i) {
      const TensorRecord* b = matched_bench(i);
      if (b == nullptr || b->shape.empty()) continue;
      const bool matrix = b->shape.size() >= 2;
      if (matrix && x == 0) continue;
      const double per = matrix ? static_cast<double>(b->shape[0]) : numel(*b);
      if (per <= 0) continue;
      const double terms = gradient_numel / per;
      give(i, *b, std::sqrt(std::max(terms, 1.0)) * gradient * (matrix ? x : 1.0));
    }
  }
  return expected;
}

std::vector<bool> residue_gradient_parameters(const CompareResult& result, const std::vector<double>& expected) {
  const Dump& target = result.target;
  const auto& rows = result.rows;
  std::vector<bool> out(rows.size(), false);
  // "{module}|{name}" of every parameter gradient judged as a residue.
  std::unordered_map<std::string, bool> residue;
  for (size_t i = 0; i < rows.size() && i < expected.size(); ++i) {
    if (expected[i] <= 0 || rows[i].target < 0) continue;
    const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
    const std::string& entry = target.entries[t.entry];
    const std::string module = module_of_parameters_grad(entry);
    if (!module.empty()) residue.emplace(module + "|" + std::string(t.suffix(target.entries)), true);
  }
  if (residue.empty()) return out;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].target < 0) continue;
    const TensorRecord& t = target.rows[static_cast<size_t>(rows[i].target)];
    const std::string_view suffix = t.suffix(target.entries);
    if (suffix.substr(0, 11) != "parameters.") continue;
    // "Module.x.Linear.forward.0" -> "Module.x.Linear".
    std::string_view entry = target.entries[t.entry];
    for (int k = 0; k < 2 && !entry.empty(); ++k) entry = entry.substr(0, entry.rfind('.') == std::string_view::npos ? 0 : entry.rfind('.'));
    out[i] = residue.count(std::string(entry) + "|" + std::string(suffix.substr(11))) > 0;
  }
  return out;
}

}  // namespace graphprobe::compare
