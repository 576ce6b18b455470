#include "format/pt_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

namespace graphprobe::pt {
namespace {

// ------------------------------------------------------------------ dtypes

const std::vector<DtypeInfo>& table() {
  static const std::vector<DtypeInfo> t = {
      {"float32", 4, "FloatStorage", "Float"},
      {"float64", 8, "DoubleStorage", "Double"},
      {"float16", 2, "HalfStorage", "Half"},
      {"bfloat16", 2, "BFloat16Storage", "BFloat16"},
      {"int64", 8, "LongStorage", "Long"},
      {"int32", 4, "IntStorage", "Int"},
      {"int16", 2, "ShortStorage", "Short"},
      {"int8", 1, "CharStorage", "Char"},
      {"uint8", 1, "ByteStorage", "Byte"},
      {"bool", 1, "BoolStorage", "Bool"},
      {"complex64", 8, "ComplexFloatStorage", "ComplexFloat"},
      {"complex128", 16, "ComplexDoubleStorage", "ComplexDouble"},
      // No legacy storage class: torch.save writes UntypedStorage + dtype.
      {"complex32", 4, nullptr, "ComplexHalf"},
      {"uint16", 2, nullptr, "UInt16"},
      {"uint32", 4, nullptr, "UInt32"},
      {"uint64", 8, nullptr, "UInt64"},
      {"float8_e5m2", 1, nullptr, "Float8_e5m2"},
      {"float8_e4m3fn", 1, nullptr, "Float8_e4m3fn"},
      {"float8_e5m2fnuz", 1, nullptr, "Float8_e5m2fnuz"},
      {"float8_e4m3fnuz", 1, nullptr, "Float8_e4m3fnuz"},
      {"float8_e8m0fnu", 1, nullptr, "Float8_e8m0fnu"},
      {"float4_e2m1fn_x2", 1, nullptr, "Float4_e2m1fn_x2"},
      {"bits8", 1, nullptr, "Bits8"},
      {"bits16", 2, nullptr, "Bits16"},
      {"bits1x8", 1, nullptr, "Bits1x8"},
      {"bits2x4", 1, nullptr, "Bits2x4"},
      {"bits4x2", 1, nullptr, "Bits4x2"},
  };
  return t;
}

const DtypeInfo kUntyped = {"uint8", 1, "UntypedStorage", "Byte"};

// ------------------------------------------------------------- byte source

// The file, or bytes in memory; every read is bounds-checked against size().
class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  // Exactly n bytes at offset, or FormatError.
  virtual void read(uint64_t offset, size_t n, void* out) const = 0;
};

class MemorySource final : public Source {
 public:
  MemorySource(std::string_view bytes, const std::string& name) : bytes_(bytes), name_(name) {}
  uint64_t size() const override { return bytes_.size(); }
  void read(uint64_t offset, size_t n, void* out) const override {
    if (offset > bytes_.size() || n > bytes_.size() - offset)
      throw FormatError("tensor file '" + name_ + "': read past its end");
    if (n > 0) std::memcpy(out, bytes_.data() + offset, n);
  }

 private:
  std::string_view bytes_;
  const std::string& name_;
};

class FileSource final : public Source {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    // O_NONBLOCK: open() of a FIFO without a writer would block forever
    // before the S_ISREG check below could refuse it (for a regular file the
    // flag changes nothing; it is cleared again anyway).
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) throw FormatError("cannot open tensor file '" + path + "': " + std::strerror(errno));
    struct stat st {};
    errno = 0;
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      const int err = errno;
      ::close(fd_);
      throw FormatError("tensor file '" + path + "' is not a regular file" +
                        (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
    }
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) (void)::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
    size_ = static_cast<uint64_t>(std::max<off_t>(st.st_size, 0));
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, size_t n, void* out) const override {
    if (offset > size_ || n > size_ - offset) throw FormatError("tensor file '" + path_ + "': read past its end");
    auto* p = static_cast<char*>(out);
    size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0) {
        if (errno == EINTR) continue;
        throw FormatError("cannot read tensor file '" + path_ + "': " + std::strerror(errno));
      }
      if (got == 0) throw FormatError("tensor file '" + path_ + "' became shorter while it was read");
      done += static_cast<size_t>(got);
    }
  }

 private:
  const std::string& path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t le64(const unsigned char* p) { return le32(p) | (static_cast<uint64_t>(le32(p + 4)) << 32); }

// -------------------------------------------------------------------- zip

struct ZipEntry {
  std::string name;
  uint16_t method = 0;
  uint64_t comp = 0, uncomp = 0, local_offset = 0;
};

// The central directory can hold at most this much (a torch.save file has a
// handful of records; the limit keeps a hostile directory size from turning
// into an allocation).
constexpr uint64_t kMaxDirectoryBytes = uint64_t{16} << 20;

class Zip {
 public:
  Zip(const Source& src, const std::string& name) : src_(src), name_(name) { read_directory(); }

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& n) const {
    for (const auto& e : entries_)
      if (e.name == n) return &e;
    return nullptr;
  }
  // The byte offset of a record's data, with data_offset + length checked to
  // lie inside the file.
  uint64_t data_offset(const ZipEntry& e) const {
    if (e.method != 0)
      bad("record '" + e.name + "' is compressed (method " + std::to_string(e.method) +
          "); torch.save stores records uncompressed");
    if (e.comp != e.uncomp)
      bad("record '" + e.name + "' has a stored length " + std::to_string(e.comp) + " that differs from its size " +
          std::to_string(e.uncomp));
    const uint64_t size = src_.size();
    if (e.local_offset > size || size - e.local_offset < 30)
      bad("record '" + e.name + "' has its header at " + std::to_string(e.local_offset) + ", past the file's " +
          std::to_string(size) + " bytes");
    unsigned char h[30];
    src_.read(e.local_offset, sizeof(h), h);
    if (le32(h) != 0x04034b50) bad("record '" + e.name + "' has no local header at " + std::to_string(e.local_offset));
    const uint64_t start = e.local_offset + 30 + le16(h + 26) + le16(h + 28);
    if (start > size || e.uncomp > size - start)
      bad("record '" + e.name + "' claims " + std::to_string(e.uncomp) + " bytes at offset " + std::to_string(start) +
          ", but the file holds " + std::to_string(size) + " bytes");
    return start;
  }
  std::string read_record(const ZipEntry& e, uint64_t limit, const char* what) const {
    const uint64_t at = data_offset(e);
    if (e.uncomp > limit)
      bad(std::string(what) + " record '" + e.name + "' is " + std::to_string(e.uncomp) + " bytes, more than the " +
          std::to_string(limit) + " graphprobe reads for one tensor");
    std::string out(static_cast<size_t>(e.uncomp), '\0');
    src_.read(at, out.size(), out.data());
    return out;
  }

  [[noreturn]] void bad(const std::string& what) const {
    throw FormatError("tensor file '" + name_ + "' is not a readable torch.save archive: " + what);
  }

 private:
  void read_directory() {
    const uint64_t size = src_.size();
    if (size < 22) bad("it is " + std::to_string(size) + " bytes long, too short for a zip archive");
    // The end-of-directory record: 22 bytes plus a comment of up to 65535.
    const size_t tail_len = static_cast<size_t>(std::min<uint64_t>(size, 22 + 65535));
    std::vector<unsigned char> tail(tail_len);
    src_.read(size - tail_len, tail_len, tail.data());
    size_t eocd = tail_len;
    for (size_t i = tail_len - 22 + 1; i-- > 0;) {
      if (le32(&tail[i]) == 0x06054b50 && i + 22 + le16(&tail[i + 20]) <= tail_len) {
        eocd = i;
        break;
      }
    }
    if (eocd == tail_len)
      bad("no zip end-of-directory record: not a zip archive, or one cut short (torch.save's legacy non-zip "
          "format is not read; re-save such a tensor with torch 1.6 or later)");
    uint64_t count = le16(&tail[eocd + 10]);
    uint64_t dir_size = le32(&tail[eocd + 12]);
    uint64_t dir_offset = le32(&tail[eocd + 16]);
    const uint64_t eocd_pos = size - tail_len + eocd;
    // zip64: a locator just before the record points at the zip64 record.
    if (eocd_pos >= 20) {
      unsigned char loc[20];
      src_.read(eocd_pos - 20, sizeof(loc), loc);
      if (le32(loc) == 0x07064b50) {
        const uint64_t z64 = le64(loc + 8);
        if (z64 > size || size - z64 < 56) bad("its zip64 end-of-directory record lies past the end of the file");
        unsigned char r[56];
        src_.read(z64, sizeof(r), r);
        if (le32(r) != 0x06064b50) bad("its zip64 locator points at no zip64 end-of-directory record");
        count = le64(r + 32);
        dir_size = le64(r + 40);
        dir_offset = le64(r + 48);
      }
    }
    if (dir_offset > size || dir_size > size - dir_offset)
      bad("its directory claims " + std::to_string(dir_size) + " bytes at offset " + std::to_string(dir_offset) +
          ", but the file holds " + std::to_string(size) + " bytes");
    if (dir_size > kMaxDirectoryBytes) bad("its directory is " + std::to_string(dir_size) + " bytes long");
    std::vector<unsigned char> dir(static_cast<size_t>(dir_size));
    src_.read(dir_offset, dir.size(), dir.data());
    size_t at = 0;
    // `count` only stops the walk; the entries kept are bounded by the
    // directory's bytes (46 at least each).
    for (uint64_t i = 0; i < count; ++i) {
      if (dir.size() - at < 46) bad("its directory ends inside entry " + std::to_string(i));
      const unsigned char* p = dir.data() + at;
      if (le32(p) != 0x02014b50) bad("its directory entry " + std::to_string(i) + " has no signature");
      const size_t name_len = le16(p + 28), extra_len = le16(p + 30), comment_len = le16(p + 32);
      if (dir.size() - at - 46 < name_len + extra_len + comment_len)
        bad("its directory entry " + std::to_string(i) + " runs past the directory");
      ZipEntry e;
      e.method = le16(p + 10);
      e.comp = le32(p + 20);
      e.uncomp = le32(p + 24);
      e.local_offset = le32(p + 42);
      e.name.assign(reinterpret_cast<const char*>(p + 46), name_len);
      // zip64 extra field: the 8-byte values of the fields that hold 0xFFFFFFFF, in this order.
      const unsigned char* x = p + 46 + name_len;
      for (size_t k = 0; k + 4 <= extra_len;) {
        const uint16_t id = le16(x + k), len = le16(x + k + 2);
        if (len > extra_len - k - 4) bad("record '" + e.name + "' has an extra field past its entry");
        if (id == 0x0001) {
          const unsigned char* v = x + k + 4;
          size_t left = len;
          for (uint64_t* f : {&e.uncomp, &e.comp, &e.local_offset}) {
            if (*f != 0xFFFFFFFFu) continue;
            if (left < 8) bad("record '" + e.name + "' has a short zip64 field");
            *f = le64(v);
            v += 8;
            left -= 8;
          }
        }
        k += 4 + len;
      }
      entries_.push_back(std::move(e));
      at += 46 + name_len + extra_len + comment_len;
    }
    if (entries_.empty()) bad("the archive holds no records");
  }

  const Source& src_;
  const std::string& name_;
  std::vector<ZipEntry> entries_;
};

// ----------------------------------------------------------------- pickle

// One value of the restricted pickle machine. Containers hold indices into
// the arena, so BINGET and tuples of tuples copy no data.
struct Node {
  enum Kind : uint8_t { kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kDict, kGlobal, kStorage, kTensor, kDtype };
  Kind kind = kNone;
  bool b = false;
  int64_t i = 0;
  std::string s;              // kStr; kGlobal "module name"
  std::vector<uint32_t> items;  // kTuple, kList
  // kStorage
  const DtypeInfo* dtype = nullptr;  // kStorage (element type), kTensor, kDtype
  std::string key, location;
  int64_t storage_numel = 0;
  // kTensor
  uint32_t storage = 0;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
  bool requires_grad = false;
};

const char* kind_name(Node::Kind k) {
  switch (k) {
    case Node::kNone: return "None";
    case Node::kBool: return "a bool";
    case Node::kInt: return "an int";
    case Node::kFloat: return "a float";
    case Node::kStr: return "a string";
    case Node::kTuple: return "a tuple";
    case Node::kList: return "a list";
    case Node::kDict: return "a dict";
    case Node::kGlobal: return "a global";
    case Node::kStorage: return "a storage";
    case Node::kTensor: return "a tensor";
    case Node::kDtype: return "a dtype";
  }
  return "a value";
}

// What the pickle machine copies out of values, each of which may be a
// memoised one reused for a few bytes of pickle. torch.save writes a key of a
// few digits, a location such as "cuda:0", names of a few dozen bytes.
constexpr size_t kMaxKeyBytes = 64;    // a storage's key and location
constexpr size_t kMaxNameBytes = 256;  // STACK_GLOBAL's module and name
constexpr size_t kMaxCallArgs = 8;     // arguments of one REDUCE
constexpr size_t kMaxDims = 64;        // a tensor's sizes and strides (torch's own limit)

class Unpickler {
 public:
  Unpickler(std::string_view data, const Zip& zip) : p_(data), zip_(zip) {}

  // The tensor the pickle builds.
  const Node& run() {
    if (p_.size() < 2 || static_cast<unsigned char>(p_[0]) != 0x80)
      bad("data.pkl does not start with a pickle protocol marker");
    for (;;) {
      const size_t at = pos_;
      const unsigned char op = u8();
      switch (op) {
        case 0x80: {  // PROTO
          const unsigned proto = u8();
          if (proto < 2 || proto > 5) bad("pickle protocol " + std::to_string(proto) + " (2 to 5 are read)");
          break;
        }
        case 0x95: (void)take(8); break;  // FRAME: a length hint only
        case '(': marks_.push_back(stack_.size()); break;
        case ')': push(make(Node::kTuple)); break;
        case 't': push(tuple_from(pop_mark())); break;
        case 0x85: push(tuple_of(1)); break;
        case 0x86: push(tuple_of(2)); break;
        case 0x87: push(tuple_of(3)); break;
        case ']': push(make(Node::kList)); break;
        case 'a': {  // APPEND: contents are never used
          (void)pop();
          expect(top(), Node::kList, "APPEND target");
          break;
        }
        case 'e': {  // APPENDS
          const size_t m = pop_mark();
          stack_.resize(m);
          expect(top(), Node::kList, "APPENDS target");
          break;
        }
        case '}': push(make(Node::kDict)); break;
        case 's': {  // SETITEM: metadata dicts; contents are never used
          (void)pop();
          (void)pop();
          expect(top(), Node::kDict, "SETITEM target");
          break;
        }
        case 'u': {  // SETITEMS
          const size_t m = pop_mark();
          if ((stack_.size() - m) % 2 != 0) bad("SETITEMS with an odd number of values at byte " + std::to_string(at));
          stack_.resize(m);
          expect(top(), Node::kDict, "SETITEMS target");
          break;
        }
        case 'N': push(make(Node::kNone)); break;
        case 0x88:
        case 0x89: {
          const uint32_t n = make(Node::kBool);
          nodes_[n].b = op == 0x88;
          push(n);
          break;
        }
        case 'K': push_int(u8()); break;
        case 'M': push_int(le16(take(2))); break;
        case 'J': push_int(static_cast<int32_t>(le32(take(4)))); break;
        case 0x8a: {  // LONG1: little-endian two's complement of n <= 8 bytes
          const unsigned n = u8();
          if (n > 8) bad("an integer of " + std::to_string(n) + " bytes at byte " + std::to_string(at));
          const unsigned char* b = take(n);
          uint64_t v = 0;
          for (unsigned k = 0; k < n; ++k) v |= static_cast<uint64_t>(b[k]) << (8 * k);
          if (n > 0 && n < 8 && (b[n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);
          push_int(static_cast<int64_t>(v));
          break;
        }
        case 'G': {
          (void)take(8);
          push(make(Node::kFloat));
          break;
        }
        case 'X': push_str(le32(take(4))); break;
        case 0x8c: push_str(u8()); break;
        case 0x8d: {
          const uint64_t n = le64(take(8));
          if (n > p_.size()) bad("a string longer than data.pkl at byte " + std::to_string(at));
          push_str(static_cast<size_t>(n));
          break;
        }
        case 'c': {  // GLOBAL "module\nname\n"
          const std::string module = line(), name = line();
          push_global(module + " " + name);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          const uint32_t name = pop(), module = pop();
          expect(module, Node::kStr, "STACK_GLOBAL module");
          expect(name, Node::kStr, "STACK_GLOBAL name");
          // The strings may be memoised and reused (BINGET, 2 bytes): the
          // concatenation copies them, so their length is bounded here.
          limit(nodes_[module].s.size(), kMaxNameBytes, "a STACK_GLOBAL module name", at);
          limit(nodes_[name].s.size(), kMaxNameBytes, "a STACK_GLOBAL name", at);
          push_global(nodes_[module].s + " " + nodes_[name].s);
          break;
        }
        case 'q': memo(u8()); break;
        case 'r': memo(le32(take(4))); break;
        case 0x94: memo(static_cast<uint32_t>(memo_.size())); break;
        case 'h': push(get(u8(), at)); break;
        case 'j': push(get(le32(take(4)), at)); break;
        case 'Q': push(persistent(pop())); break;
        case 'R': {
          const uint32_t args = pop(), fn = pop();
          push(reduce(fn, args));
          break;
        }
        case '.': {
          if (stack_.size() != 1) bad("the pickle ends with " + std::to_string(stack_.size()) + " values, not one");
          const Node& t = nodes_[stack_.back()];
          if (t.kind != Node::kTensor) bad(std::string("the file holds ") + kind_name(t.kind) + ", not one tensor");
          return t;
        }
        case 'b':
          bad("the pickle sets an object's state (BUILD) at byte " + std::to_string(at) +
              ": a tensor subclass or a tensor with Python attributes, not a plain tensor");
        default: {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "0x%02x", op);
          bad(std::string("pickle opcode ") + hex + " at byte " + std::to_string(at) +
              " is not one torch.save writes for a tensor");
        }
      }
    }
  }

  const Node& node(uint32_t i) const { return nodes_[i]; }

 private:
  [[noreturn]] void bad(const std::string& what) const { zip_.bad(what); }
  // A value copied out of a memoised one (reusable for 2 bytes of pickle)
  // is limited, so that no input makes copies grow faster than the pickle.
  void limit(size_t n, size_t max, const char* what, size_t at) const {
    if (n > max)
      bad(std::string(what) + " of " + std::to_string(n) + " bytes at byte " + std::to_string(at) + " (at most " +
          std::to_string(max) + " are read; torch.save writes a few dozen)");
  }

  unsigned char u8() { return *take(1); }
  const unsigned char* take(size_t n) {
    if (n > p_.size() - pos_) bad("data.pkl ends in the middle of a value (byte " + std::to_string(pos_) + ")");
    const auto* r = reinterpret_cast<const unsigned char*>(p_.data() + pos_);
    pos_ += n;
    return r;
  }
  std::string line() {
    const size_t end = p_.find('\n', pos_);
    if (end == std::string_view::npos) bad("data.pkl ends inside a GLOBAL name");
    std::string s(p_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }

  uint32_t make(Node::Kind k) {
    nodes_.emplace_back();
    nodes_.back().kind = k;
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  void push(uint32_t n) { stack_.push_back(n); }
  void push_int(int64_t v) {
    const uint32_t n = make(Node::kInt);
    nodes_[n].i = v;
    push(n);
  }
  void push_str(size_t len) {
    const unsigned char* b = take(len);
    const uint32_t n = make(Node::kStr);
    nodes_[n].s.assign(reinterpret_cast<const char*>(b), len);
    push(n);
  }
  void push_global(std::string name) {
    const uint32_t n = make(Node::kGlobal);
    nodes_[n].s = std::move(name);
    push(n);
  }
  uint32_t pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      bad("the pickle takes a value from an empty stack at byte " + std::to_string(pos_));
    const uint32_t n = stack_.back();
    stack_.pop_back();
    return n;
  }
  uint32_t top() {
    if (stack_.empty()) bad("the pickle's stack is empty at byte " + std::to_string(pos_));
    return stack_.back();
  }
  size_t pop_mark() {
    if (marks_.empty()) bad("the pickle closes a MARK it never opened at byte " + std::to_string(pos_));
    const size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  uint32_t tuple_from(size_t mark) {
    const uint32_t n = make(Node::kTuple);
    nodes_[n].items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return n;
  }
  uint32_t tuple_of(size_t k) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() - floor < k) bad("the pickle builds a tuple from too few values at byte " + std::to_string(pos_));
    return tuple_from(stack_.size() - k);
  }
  void memo(uint32_t id) { memo_[id] = top(); }
  uint32_t get(uint32_t id, size_t at) {
    const auto it = memo_.find(id);
    if (it == memo_.end())
      bad("the pickle reads memo " + std::to_string(id) + ", never stored, at byte " + std::to_string(at));
    return it->second;
  }
  void expect(uint32_t n, Node::Kind k, const char* what) const {
    if (nodes_[n].kind != k)
      bad(std::string(what) + " is " + kind_name(nodes_[n].kind) + ", expected " + kind_name(k));
  }
  const std::vector<uint32_t>& tuple(uint32_t n, const char* what) const {
    expect(n, Node::kTuple, what);
    return nodes_[n].items;
  }
  int64_t integer(uint32_t n, const char* what) const {
    expect(n, Node::kInt, what);
    return nodes_[n].i;
  }
  std::vector<int64_t> ints(uint32_t n, const char* what) const {
    const std::vector<uint32_t>& items = tuple(n, what);
    if (items.size() > kMaxDims)
      bad(std::string(what) + " has " + std::to_string(items.size()) + " dimensions (at most " +
          std::to_string(kMaxDims) + " are read)");
    std::vector<int64_t> out;
    for (uint32_t e : items) {
      const int64_t v = integer(e, what);
      if (v < 0) bad(std::string(what) + " holds the negative value " + std::to_string(v));
      out.push_back(v);
    }
    return out;
  }

  // ('storage', storage class, key, location, numel[, None])
  uint32_t persistent(uint32_t pid) {
    // One tensor has one storage: a second persistent load (its id may be a
    // memoised tuple, reused for 3 bytes of pickle) is refused, so that the
    // key and location below are copied once per file.
    if (storages_ > 0)
      bad("the pickle loads a second storage at byte " + std::to_string(pos_ - 1) +
          " (a torch.save file of one tensor has one storage)");
    ++storages_;
    const std::vector<uint32_t>& pid_items = tuple(pid, "the persistent id");
    if (pid_items.size() < 5 || pid_items.size() > 6)
      bad("a persistent id of " + std::to_string(pid_items.size()) +
          " values, not ('storage', type, key, location, numel[, None])");
    const std::vector<uint32_t> t = pid_items;  // a copy of at most 6: make() below may move nodes_
    if (nodes_[t[0]].kind != Node::kStr || nodes_[t[0]].s != "storage")
      bad("a persistent id that is not ('storage', type, key, location, numel)");
    expect(t[1], Node::kGlobal, "the storage type");
    const std::string& type = nodes_[t[1]].s;
    const DtypeInfo* dtype = nullptr;
    if (type == "torch.storage UntypedStorage" || type == "torch UntypedStorage") {
      dtype = &kUntyped;
    } else if (type.rfind("torch ", 0) == 0 && type.size() > 13 && type.compare(type.size() - 7, 7, "Storage") == 0) {
      // Python's legacy classes (FloatStorage) and the names torch's C++
      // pickler gives the other dtypes (Float8_e4m3fnStorage).
      dtype = dtype_by_c10_name(std::string_view(type).substr(6, type.size() - 13));
    }
    if (dtype == nullptr) bad("storage type '" + type + "' is not a storage of a dtype graphprobe reads");
    expect(t[2], Node::kStr, "the storage key");
    expect(t[3], Node::kStr, "the storage location");
    limit(nodes_[t[2]].s.size(), kMaxKeyBytes, "the storage key", pos_ - 1);
    limit(nodes_[t[3]].s.size(), kMaxKeyBytes, "the storage location", pos_ - 1);
    const int64_t numel = integer(t[4], "the storage's element count");
    if (numel < 0) bad("the storage claims " + std::to_string(numel) + " elements");
    const uint32_t n = make(Node::kStorage);
    nodes_[n].dtype = dtype;
    nodes_[n].key = nodes_[t[2]].s;
    nodes_[n].location = nodes_[t[3]].s;
    nodes_[n].storage_numel = numel;
    return n;
  }

  uint32_t reduce(uint32_t fn, uint32_t args) {
    expect(fn, Node::kGlobal, "a called object");
    // Both may be memoised and reused for 3 bytes of pickle: the name is
    // limited by GLOBAL's own bytes or kMaxNameBytes, the arguments by
    // kMaxCallArgs (torch.save passes at most 7) before they are copied.
    const std::string name = nodes_[fn].s;
    const std::vector<uint32_t>& args_items = tuple(args, "call arguments");
    if (args_items.size() > kMaxCallArgs)
      bad("'" + name + "' called with " + std::to_string(args_items.size()) + " arguments (at most " +
          std::to_string(kMaxCallArgs) + " are read)");
    const std::vector<uint32_t> a = args_items;  // a copy: make() below may move nodes_
    if (name == "collections OrderedDict") return make(Node::kDict);
    if (name == "torch._utils _rebuild_tensor_v2" || name == "torch._utils _rebuild_tensor_v3") {
      const bool v3 = name.back() == '3';
      // One tensor per file: a second call (the sizes and strides it copies
      // may be memoised tuples) is refused.
      if (tensors_ > 0)
        bad("the pickle rebuilds a second tensor at byte " + std::to_string(pos_ - 1) +
            " (a torch.save file of one tensor rebuilds one)");
      ++tensors_;
      if (a.size() < (v3 ? 7u : 6u))
        bad(name.substr(13) + " called with " + std::to_string(a.size()) + " arguments");
      expect(a[0], Node::kStorage, "the tensor's storage");
      const uint32_t n = make(Node::kTensor);
      Node t;
      t.kind = Node::kTensor;
      t.storage = a[0];
      t.offset = integer(a[1], "the storage offset");
      if (t.offset < 0) bad("the storage offset is negative (" + std::to_string(t.offset) + ")");
      t.sizes = ints(a[2], "the size");
      t.strides = ints(a[3], "the stride");
      if (nodes_[a[4]].kind != Node::kBool) bad("requires_grad is not a bool");
      t.requires_grad = nodes_[a[4]].b;
      if (v3) {
        expect(a[6], Node::kGlobal, "the dtype");
        const std::string& d = nodes_[a[6]].s;
        t.dtype = d.rfind("torch ", 0) == 0 ? dtype_by_name(std::string_view(d).substr(6)) : nullptr;
        if (t.dtype == nullptr) bad("dtype '" + d + "' is not one graphprobe reads");
      } else {
        t.dtype = nodes_[a[0]].dtype;
      }
      nodes_[n] = std::move(t);
      return n;
    }
    if (name == "torch._utils _rebuild_parameter" || name == "torch._utils _rebuild_parameter_with_state") {
      if (a.empty()) bad(name.substr(13) + " called without arguments");
      expect(a[0], Node::kTensor, "the parameter's data");
      return a[0];
    }
    if (name.rfind("torch._utils _rebuild_qtensor", 0) == 0)
      bad("the file holds a quantized tensor, which graphprobe does not read");
    bad("the pickle calls '" + name + "', which is not how torch.save writes a plain tensor");
  }

  std::string_view p_;
  const Zip& zip_;
  size_t pos_ = 0;
  std::vector<Node> nodes_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
  int storages_ = 0;  // persistent loads so far: at most one
  int tensors_ = 0;   // _rebuild_tensor calls so far: at most one
};

bool mul_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool add_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }

TensorLayout read(const Source& src, const std::string& name) {
  const Zip zip(src, name);
  // torch.load: the archive's records share the first record's folder.
  const std::string& first = zip.entries().front().name;
  const size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0) zip.bad("its first record '" + first + "' is not inside a folder");
  const std::string prefix = first.substr(0, slash + 1);
  if (const ZipEntry* order = zip.find(prefix + "byteorder")) {
    const std::string text = zip.read_record(*order, 16, "byteorder");
    if (text != "little") zip.bad("its byteorder is '" + text + "'; graphprobe reads little-endian files only");
  }
  const ZipEntry* pkl = zip.find(prefix + "data.pkl");
  if (pkl == nullptr) zip.bad("it has no record '" + prefix + "data.pkl'");
  const std::string pickle = zip.read_record(*pkl, kMaxPickleBytes, "the pickle");
  Unpickler u(pickle, zip);
  const Node& t = u.run();
  const Node& s = u.node(t.storage);

  TensorLayout out;
  out.dtype = t.dtype;
  out.sizes = t.sizes;
  out.strides = t.strides;
  out.storage_offset = t.offset;
  out.location = s.location;
  out.requires_grad = t.requires_grad;
  if (out.sizes.size() != out.strides.size())
    zip.bad("the tensor has " + std::to_string(out.sizes.size()) + " sizes but " +
            std::to_string(out.strides.size()) + " strides");
  const std::string where = "the storage (record '" + prefix + "data/" + s.key + "')";
  // The storage's bytes as the pickle claims them, and as the file holds them.
  int64_t claimed = 0;
  if (mul_overflows(s.storage_numel, static_cast<int64_t>(s.dtype->itemsize), &claimed))
    zip.bad(where + " claims " + std::to_string(s.storage_numel) + " elements, more than any file holds");
  out.storage_bytes = static_cast<uint64_t>(claimed);
  if (claimed > 0) {
    const ZipEntry* rec = zip.find(prefix + "data/" + s.key);
    if (rec == nullptr) zip.bad(where + " is missing");
    out.data_offset = zip.data_offset(*rec);
    if (rec->uncomp < out.storage_bytes)
      zip.bad(where + " claims " + std::to_string(s.storage_numel) + " elements of " +
              std::to_string(s.dtype->itemsize) + " bytes (" + std::to_string(claimed) + " bytes), but holds " +
              std::to_string(rec->uncomp) + " bytes");
  }
  // The tensor's extent: storage_offset + sum((size - 1) * stride) is the
  // last element it reads; that element's end must lie inside the storage.
  int64_t numel = 1;
  for (int64_t d : out.sizes)
    if (mul_overflows(numel, d, &numel)) zip.bad("the tensor's size has more elements than any file holds");
  out.numel = numel;
  if (numel > 0) {
    int64_t last = out.storage_offset;
    for (size_t i = 0; i < out.sizes.size(); ++i) {
      int64_t step = 0;
      if (mul_overflows(out.sizes[i] - 1, out.strides[i], &step) || add_overflows(last, step, &last))
        zip.bad("the tensor's strides reach past any file's size");
    }
    int64_t end = 0;
    const int64_t itemsize = static_cast<int64_t>(out.dtype->itemsize);
    if (add_overflows(last, 1, &end) || mul_overflows(end, itemsize, &end) ||
        static_cast<uint64_t>(end) > out.storage_bytes) {
      std::string sz, st;
      for (size_t i = 0; i < out.sizes.size(); ++i) {
        sz += (i ? ", " : "") + std::to_string(out.sizes[i]);
        st += (i ? ", " : "") + std::to_string(out.strides[i]);
      }
      zip.bad("the tensor (dtype " + std::string(out.dtype->name) + ", size [" + sz + "], stride [" + st +
              "], storage offset " + std::to_string(out.storage_offset) + ") reads past the end of " + where +
              ", which holds " + std::to_string(out.storage_bytes) + " bytes");
    }
    // Inside the storage, so only repeated elements can make numel exceed
    // what is stored; their count is bounded here, not by the file.
    const uint64_t stored = out.storage_bytes / static_cast<uint64_t>(itemsize);
    if (static_cast<uint64_t>(numel) > stored && numel > kMaxRepeatedElements)
      zip.bad("the tensor has " + std::to_string(numel) + " elements but its storage holds " + std::to_string(stored) +
              " (zero or overlapping strides repeat them); graphprobe reads such tensors up to " +
              std::to_string(kMaxRepeatedElements) + " elements");
  }
  return out;
}

void put_int(std::string& p, int64_t v) {
  if (v >= 0 && v < 256) {
    p += 'K';
    p += static_cast<char>(v);
  } else if (v >= 0 && v < 65536) {
    p += 'M';
    p += static_cast<char>(v & 0xff);
    p += static_cast<char>((v >> 8) & 0xff);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    p += 'J';
    for (int k = 0; k < 4; ++k) p += static_cast<char>((static_cast<uint32_t>(v) >> (8 * k)) & 0xff);
  } else {
    p += '\x8a';
    p += '\x08';
    for (int k = 0; k < 8; ++k) p += static_cast<char>((static_cast<uint64_t>(v) >> (8 * k)) & 0xff);
  }
}

void put_str(std::string& p, std::string_view s) {
  p += 'X';
  const auto n = static_cast<uint32_t>(s.size());
  for (int k = 0; k < 4; ++k) p += static_cast<char>((n >> (8 * k)) & 0xff);
  p += s;
}

void put_global(std::string& p, std::string_view module, std::string_view name) {
  p += 'c';
  p += module;
  p += '\n';
  p += name;
  p += '\n';
}

void put_ints(std::string& p, const std::vector<int64_t>& v) {
  p += '(';
  for (int64_t x : v) put_int(p, x);
  p += 't';
}

}  // namespace

const std::vector<DtypeInfo>& all_dtypes() { return table(); }

const DtypeInfo* dtype_by_name(std::string_view name) {
  for (const auto& d : table())
    if (name == d.name) return &d;
  return nullptr;
}

const DtypeInfo* dtype_by_c10_name(std::string_view c10_name) {
  for (const auto& d : table())
    if (c10_name == d.c10_name) return &d;
  return nullptr;
}

TensorLayout read_tensor_layout(const std::string& path) {
  const FileSource src(path);
  return read(src, path);
}

TensorLayout read_tensor_layout(std::string_view bytes, const std::string& name) {
  const MemorySource src(bytes, name);
  return read(src, name);
}

void read_storage(const std::string& path, const TensorLayout& layout, void* out) {
  const FileSource src(path);
  if (layout.storage_bytes == 0) return;
  if (layout.data_offset > src.size() || layout.storage_bytes > src.size() - layout.data_offset)
    throw FormatError("tensor file '" + path + "' became shorter while it was read");
  src.read(layout.data_offset, static_cast<size_t>(layout.storage_bytes), out);
}

std::string tensor_pickle(const DtypeInfo& dtype, const std::vector<int64_t>& sizes) {
  int64_t numel = 1;
  for (int64_t d : sizes) numel *= d;
  std::vector<int64_t> strides(sizes.size());
  int64_t step = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<int64_t>(sizes[i], 1);
  }
  const bool legacy = dtype.legacy_storage != nullptr;
  std::string p = "\x80\x02";
  put_global(p, "torch._utils", legacy ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
  p += '(';
  // The persistent id of the storage; its element count is in the storage
  // class's elements: bytes for UntypedStorage.
  p += '(';
  put_str(p, "storage");
  if (legacy) put_global(p, "torch", dtype.legacy_storage);
  else put_global(p, "torch.storage", "UntypedStorage");
  put_str(p, "0");
  put_str(p, "cpu");
  put_int(p, legacy ? numel : numel * static_cast<int64_t>(dtype.itemsize));
  p += 't';
  p += 'Q';
  put_int(p, 0);  // storage offset
  put_ints(p, sizes);
  put_ints(p, strides);
  p += '\x89';  // requires_grad False
  put_global(p, "collections", "OrderedDict");
  p += ')';
  p += 'R';
  if (!legacy) put_global(p, "torch", dtype.name);
  p += 't';
  p += 'R';
  p += '.';
  return p;
}

}  // namespace graphprobe::pt
