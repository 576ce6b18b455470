// The torch.save reader (format/pt_archive): files torch writes are read;
// crafted files whose pickle or zip directory claims more than the file holds
// are refused with FormatError naming the file; random mutations never read
// outside the file; the crafted files of tests/reliability/crafted_pt.py (the
// folder named by GRAPHPROBE_PT_FILES, which ctest writes and sets: see
// CMakeLists.txt) are each refused with their reason. scripts/asan_parsers.sh
// runs this under ASan/UBSan.
#include <dirent.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "format/pt_archive.h"
#include "tests/check.h"

namespace pt = graphprobe::pt;

namespace {

void put16(std::string& s, uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

// A zip archive of stored records (no CRC: the reader does not check it).
std::string zip(const std::vector<std::pair<std::string, std::string>>& records) {
  std::string out, dir;
  for (const auto& [name, data] : records) {
    const auto offset = static_cast<uint32_t>(out.size());
    put32(out, 0x04034b50);
    put16(out, 20), put16(out, 0), put16(out, 0), put16(out, 0), put16(out, 0);
    put32(out, 0), put32(out, static_cast<uint32_t>(data.size())), put32(out, static_cast<uint32_t>(data.size()));
    put16(out, static_cast<uint32_t>(name.size())), put16(out, 0);
    out += name;
    out += data;
    put32(dir, 0x02014b50);
    put16(dir, 20), put16(dir, 20), put16(dir, 0), put16(dir, 0), put16(dir, 0), put16(dir, 0);
    put32(dir, 0), put32(dir, static_cast<uint32_t>(data.size())), put32(dir, static_cast<uint32_t>(data.size()));
    put16(dir, static_cast<uint32_t>(name.size())), put16(dir, 0), put16(dir, 0), put16(dir, 0), put16(dir, 0);
    put32(dir, 0), put32(dir, offset);
    dir += name;
  }
  const auto dir_offset = static_cast<uint32_t>(out.size());
  out += dir;
  put32(out, 0x06054b50);
  put16(out, 0), put16(out, 0), put16(out, static_cast<uint32_t>(records.size())),
      put16(out, static_cast<uint32_t>(records.size()));
  put32(out, static_cast<uint32_t>(dir.size())), put32(out, dir_offset), put16(out, 0);
  return out;
}

std::string tensor_file(const pt::DtypeInfo& d, const std::vector<int64_t>& sizes) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  std::string data(static_cast<size_t>(numel) * d.itemsize, '\x5a');
  return zip({{"archive/data.pkl", pt::tensor_pickle(d, sizes)}, {"archive/byteorder", "little"},
              {"archive/data/0", data}});
}

void every_dtype_round_trips() {
  for (const auto& d : pt::all_dtypes()) {
    const pt::TensorLayout l = pt::read_tensor_layout(tensor_file(d, {2, 3}), "x.pt");
    CHECK(l.dtype == &d);
    CHECK(l.sizes == (std::vector<int64_t>{2, 3}));
    CHECK(l.strides == (std::vector<int64_t>{3, 1}));
    CHECK_EQ(l.numel, int64_t{6});
    CHECK_EQ(l.storage_bytes, uint64_t{6} * d.itemsize);
    CHECK_EQ(l.location, std::string("cpu"));
  }
  const pt::TensorLayout scalar = pt::read_tensor_layout(tensor_file(*pt::dtype_by_name("float32"), {}), "s.pt");
  CHECK(scalar.sizes.empty() && scalar.numel == 1 && scalar.storage_bytes == 4);
  const pt::TensorLayout empty = pt::read_tensor_layout(tensor_file(*pt::dtype_by_name("float32"), {0, 3}), "e.pt");
  CHECK(empty.numel == 0 && empty.storage_bytes == 0);
}

// Files of earlier graphprobe versions (torch::pickle_save names a storage
// class per dtype, torch.Float8_e4m3fnStorage, that Python's torch.load does
// not know) stay readable by compare.
void storage_classes_of_torchs_cpp_pickler_are_read() {
  std::string pkl = pt::tensor_pickle(*pt::dtype_by_name("float32"), {2, 3});
  const std::string legacy = "FloatStorage";
  pkl.replace(pkl.find(legacy), legacy.size(), "Float8_e4m3fnStorage");
  const pt::TensorLayout l =
      pt::read_tensor_layout(zip({{"archive/data.pkl", pkl}, {"archive/data/0", std::string(6, '\x38')}}), "old.pt");
  CHECK_EQ(std::string(l.dtype->name), std::string("float8_e4m3fn"));
  CHECK_EQ(l.storage_bytes, uint64_t{6});
}

void claims_past_the_file_are_refused() {
  const pt::DtypeInfo& f32 = *pt::dtype_by_name("float32");
  std::string good = tensor_file(f32, {4});
  // The pickle's storage claim: numel 4 -> 200 (BININT1 4 after "cpu").
  std::string pkl = pt::tensor_pickle(f32, {4});
  const size_t at = pkl.find("cpu") + 3;
  CHECK(pkl[at] == 'K' && pkl[at + 1] == 4);
  pkl[at + 1] = static_cast<char>(200);
  const std::string claim = zip({{"archive/data.pkl", pkl}, {"archive/data/0", std::string(16, '\0')}});
  CHECK_THROWS(pt::FormatError, pt::read_tensor_layout(claim, "claim.pt"),
               "tensor file 'claim.pt' is not a readable torch.save archive: the storage (record 'archive/data/0') "
               "claims 200 elements of 4 bytes (800 bytes), but holds 16 bytes");
  CHECK_THROWS(pt::FormatError, pt::read_tensor_layout(good.substr(0, good.size() - 1), "cut.pt"), "cut.pt");
  // An expanded view (stride 0) is read while its element count stays under
  // kMaxRepeatedElements; beyond, the count is not bounded by the file.
  std::string expanded = pt::tensor_pickle(f32, {1000});  // strides (1,): make them (0,)
  const size_t stride_at = expanded.rfind("(K\x01t");
  CHECK(stride_at != std::string::npos);
  expanded[stride_at + 2] = '\0';
  expanded.replace(expanded.find("cpu") + 3, 3, std::string("M\x01\x00", 3));  // storage numel 1
  const pt::TensorLayout e =
      pt::read_tensor_layout(zip({{"archive/data.pkl", expanded}, {"archive/data/0", std::string(4, '\0')}}), "e.pt");
  CHECK(e.numel == 1000 && e.storage_bytes == 4 && e.strides == std::vector<int64_t>{0});
  CHECK_THROWS(pt::FormatError, pt::read_tensor_layout(std::string(), "none.pt"), "too short for a zip archive");
}

// Random edits of a valid file: each read either succeeds with a layout
// inside the file or throws FormatError; ASan/UBSan catch anything else.
void mutations_never_read_outside() {
  const std::string seed = tensor_file(*pt::dtype_by_name("float16"), {3, 5});
  std::mt19937 rng(28);
  int read = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = seed;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) {
      const size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[pos] = static_cast<char>(rng()); break;
        case 1: s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8))); break;
        case 2: s[pos] = static_cast<char>(0xff); break;
        default: s.erase(pos, 1 + rng() % 4);
      }
      if (s.empty()) s = "x";
    }
    try {
      const pt::TensorLayout l = pt::read_tensor_layout(s, "m.pt");
      CHECK(l.data_offset + l.storage_bytes <= s.size());
      ++read;
    } catch (const pt::FormatError&) {
      ++refused;
    }
  }
  CHECK(read > 0 && refused > 0);
  CHECK_EQ(read + refused, 20000);
}

// The crafted files of tests/reliability/crafted_pt.py: each refused with
// FormatError naming the file and giving its reason (<name>.why beside it).
// Required: a run without them would pass without reading one.
void crafted_files() {
  const char* dir = std::getenv("GRAPHPROBE_PT_FILES");
  if (dir == nullptr) {
    graphprobe::test::fail(__FILE__, __LINE__,
                           "GRAPHPROBE_PT_FILES is not set: run through ctest (scripts/run_cpp_tests.sh), which writes "
                           "the crafted files with tests/reliability/crafted_pt.py, or set it to a folder they were "
                           "written to");
    return;
  }
  DIR* d = ::opendir(dir);
  CHECK(d != nullptr);
  if (d == nullptr) return;
  int n = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 3 || name.substr(name.size() - 3) != ".pt") continue;
    const std::string path = std::string(dir) + "/" + name;
    std::ifstream why_file(path.substr(0, path.size() - 3) + ".why", std::ios::binary);
    const std::string why{std::istreambuf_iterator<char>(why_file), std::istreambuf_iterator<char>()};
    CHECK(!why.empty());
    CHECK_THROWS(pt::FormatError, pt::read_tensor_layout(path), "tensor file '" + path + "'");
    CHECK_THROWS(pt::FormatError, pt::read_tensor_layout(path), why);
    ++n;
  }
  ::closedir(d);
  CHECK(n >= 20);  // every attack of crafted_pt.ATTACKS, not a stray file
}

void run_all() {
  every_dtype_round_trips();
  storage_classes_of_torchs_cpp_pickler_are_read();
  claims_past_the_file_are_refused();
  mutations_never_read_outside();
  crafted_files();
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run_all)
