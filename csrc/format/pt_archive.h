#pragma once
// A torch.save file holding one tensor, read and written without torch.
// Torch-free, so that the reader runs in the C++ unit tests under ASan/UBSan
// (scripts/asan_parsers.sh) with crafted files.
//
// Reading: `graphprobe compare` of tensor dumps reads files that anyone may
// have written (a dump folder from another machine, a torn file after a
// crash). torch's own C++ unpickler trusts the pickle's sizes (a claimed
// element count larger than the stored bytes would make compare read past its
// buffer), so the file is read here instead, with every size,
// stride, offset and count checked against what the file holds:
//  * the zip archive (stored entries, zip64 as torch writes it): every
//    directory field, record offset and length lies inside the file;
//  * the pickle: only the opcodes and calls torch.save writes for one tensor
//    (_rebuild_tensor_v2 / _v3, _rebuild_parameter, OrderedDict), at most
//    kMaxPickleBytes; values are indices into one arena (BINGET and tuples
//    of tuples copy no data). The few copies made out of values, which may be
//    memoised ones reused for 2-3 bytes of pickle each, are bounded per file:
//    one storage (persistent load) and one _rebuild_tensor call per file, a
//    storage key and location of at most 64 bytes, STACK_GLOBAL names of at
//    most 256, at most 8 call arguments and 64 dimensions. Memory is then
//    linear in the pickle (one arena value per opcode at most);
//  * the tensor: sizes and strides non-negative, element count and extent
//    computed with overflow checks; (storage offset + the largest index + 1)
//    * itemsize within the storage; the storage's claimed bytes within its
//    record; an element count beyond the storage's (repeated elements) at
//    most kMaxRepeatedElements.
// Any violation throws FormatError naming the file and what was wrong.
//
// Writing (acl_save, the tensor task): torch::jit::pickle_save names a
// storage class per dtype (torch.Float8_e4m3fnStorage, torch.UInt16Storage,
// ...) that Python's torch.load does not know for the dtypes added after the
// legacy storage classes; tensor_pickle() writes what torch.save writes for
// those: _rebuild_tensor_v3 with a torch.storage.UntypedStorage and the dtype.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace graphprobe::pt {

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A dtype graphprobe reads and writes in torch.save files.
struct DtypeInfo {
  const char* name;           // torch's, without "torch.": "float32", "float8_e4m3fn"
  size_t itemsize;            // bytes per element
  const char* legacy_storage;  // Python's typed storage class ("FloatStorage"), or nullptr
  const char* c10_name;        // c10::toString of the ScalarType ("Float", "Float8_e4m3fn")
};

// nullptr for a name torch.save files do not use for plain tensors (the
// quantized dtypes, the sub-byte int1..7/uint1..7).
const DtypeInfo* dtype_by_name(std::string_view name);
const DtypeInfo* dtype_by_c10_name(std::string_view c10_name);
// Every dtype in the table, for tests.
const std::vector<DtypeInfo>& all_dtypes();

// The pickle of one tensor is a few hundred bytes; a larger one is refused
// (each opcode may add a value to the machine, so this bounds its memory).
constexpr size_t kMaxPickleBytes = size_t{64} << 10;

// A tensor with more elements than its storage holds repeats stored
// elements (a zero or overlapping stride, as torch.save writes an expanded
// view). Its element count is then not bounded by the file, so it is read
// only up to this many elements (2^28: 2 GiB as float64).
constexpr int64_t kMaxRepeatedElements = int64_t{1} << 28;

// Where one tensor's data lies in its file, all of it checked.
struct TensorLayout {
  const DtypeInfo* dtype = nullptr;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;   // elements
  int64_t numel = 0;
  uint64_t data_offset = 0;     // byte offset of the storage's bytes in the file
  uint64_t storage_bytes = 0;   // storage length in bytes, within the file
  std::string location;         // the device torch.save recorded ("cpu", "cuda:0")
  bool requires_grad = false;
};

// The layout of the one tensor in the torch.save file `path`. Throws
// FormatError naming `path`.
TensorLayout read_tensor_layout(const std::string& path);
// The same over bytes in memory; `name` stands for the file in messages.
TensorLayout read_tensor_layout(std::string_view bytes, const std::string& name);
// Reads the storage's bytes (layout.storage_bytes of them) into `out`.
// Throws FormatError when the file no longer holds them.
void read_storage(const std::string& path, const TensorLayout& layout, void* out);

// The data.pkl that torch.save writes for a contiguous tensor of `dtype`
// and `sizes` whose bytes are the record data/0: _rebuild_tensor_v2 with the
// legacy storage class where the dtype has one, _rebuild_tensor_v3 with
// UntypedStorage and the dtype otherwise (as torch.save does).
std::string tensor_pickle(const DtypeInfo& dtype, const std::vector<int64_t>& sizes);

}  // namespace graphprobe::pt
