#pragma once
// Writes msprobe's dump.json from the calls of one step. Torch-free.
//
// Calls arrive already identified, numbered and ordered (csrc/identity), as
// the record types of csrc/record/call_record.h: this file only serializes
// them, with the key names of csrc/record/dump_keys.h.

#include <string>
#include <string_view>
#include <vector>

#include "record/call_record.h"

namespace graphprobe {

// Returns the whole document, calls in the given order. `level`, `task` and
// `dump_data_dir` (the tensor files' folder; null when empty) are copied to
// the header.
// Whether a record name is a backward call ("Module.a.Linear.backward.0",
// "Functional.linear.0.backward") or a parameter-gradient record
// ("Module.a.Linear.parameters_grad.0"): their parts differ from a forward
// call's (docs/formats.md).
bool is_backward(std::string_view name);
bool is_params_grad(std::string_view name);

std::string build_dump_json(const std::string& task, const std::string& level, const std::vector<CallRecord>& calls,
                            const std::string& dump_data_dir = "");

}  // namespace graphprobe
