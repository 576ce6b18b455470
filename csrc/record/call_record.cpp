#include "record/call_record.h"

#include <algorithm>

#include "record/dump_keys.h"

namespace graphprobe {

std::string entry_name(const std::string& entry_template, int64_t n) {
  std::string out = entry_template;
  const auto pos = out.find("{n}");
  if (pos == std::string::npos) return out + "." + std::to_string(n);
  out.replace(pos, 3, std::to_string(n));
  return out;
}

std::string io_name(const Place& place) {
  std::string out;
  for (size_t i = 0; i < place.size(); ++i) {
    if (i == 0) out = place[0] == dump_keys::kInputArgs || place[0] == dump_keys::kInputKwargs ? "input" : place[0];
    else out += "." + place[i];
  }
  return out;
}

DumpSummary summarize(const std::vector<CallRecord>& calls) {
  DumpSummary s;
  s.entries = static_cast<int64_t>(calls.size());
  for (const CallRecord& c : calls) {
    s.tensors += static_cast<int64_t>(c.tensors.size());
    if (std::any_of(c.tensors.begin(), c.tensors.end(), [](const TensorRow& r) { return r.writes > 1; }))
      s.overwritten.push_back(c.name);
  }
  return s;
}

}  // namespace graphprobe
