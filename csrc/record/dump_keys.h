#pragma once
// The key names of dump.json (msprobe's format, docs/formats.md), spelled
// once: format/dump_json.cpp writes them and compare/dump_reader.cpp reads
// them. Header-only and torch-free, so both native modules can include it.

namespace graphprobe::dump_keys {

// The document's header and its table of calls.
inline constexpr const char kTask[] = "task";
inline constexpr const char kLevel[] = "level";
inline constexpr const char kFramework[] = "framework";
inline constexpr const char kDumpDataDir[] = "dump_data_dir";
inline constexpr const char kData[] = "data";

// The parts of one call, in the order they are written.
inline constexpr const char kInputArgs[] = "input_args";
inline constexpr const char kInputKwargs[] = "input_kwargs";
inline constexpr const char kOutput[] = "output";
inline constexpr const char kParameters[] = "parameters";  // module records only

// One value: a tensor record or a non-tensor leaf ({"type": ..., "value": ...}).
inline constexpr const char kType[] = "type";
inline constexpr const char kValue[] = "value";
inline constexpr const char kTensorType[] = "torch.Tensor";  // the "type" of a tensor record
inline constexpr const char kDtype[] = "dtype";
inline constexpr const char kShape[] = "shape";
inline constexpr const char kMax[] = "Max";
inline constexpr const char kMin[] = "Min";
inline constexpr const char kMean[] = "Mean";
inline constexpr const char kNorm[] = "Norm";
inline constexpr const char kRequiresGrad[] = "requires_grad";
inline constexpr const char kDataName[] = "data_name";      // tensor task: the tensor's file
inline constexpr const char kWriteCount[] = "write_count";  // written when > 1 (replays collapsed)
inline constexpr const char kSketch[] = "Sketch";  // graphprobe's four signed sums (stats/sketch.h)
inline constexpr const char kMd5[] = "md5";  // summary_mode "md5": the checksum, 16 hex digits (or null)

}  // namespace graphprobe::dump_keys
