#pragma once
// A dump.json read ahead of its parser and released behind it, so that a
// compare holds a window of each file rather than the whole text. Torch-free.
//
// A regular file is mapped (mapped_file_guard.h: fresh memory's pages are
// zeroed when first touched) and checked for NUL bytes
// piece by piece before the parser starts; pages behind the parser are given
// back (MADV_DONTNEED), so that a compare holds a window of the file. A file
// that shrinks while it is mapped reads as zeros past its new end, and
// check_intact() then reports it.
//
// Anything else (a pipe, an empty file, or no guard slot left) is read into
// an anonymous mapping of its size as it goes: pages not yet read cost
// nothing, and pages released are given back. A parser that runs into bytes
// not yet read finds NUL bytes, which JSON never allows, fails, and is
// retried after more() (see parse_dump).
//
// Either way a NUL byte in the file itself (a torn or sparse file) is
// reported as soon as it is seen, as a DumpFormatError naming the file and
// the byte's offset, so that such a file is never loaded whole.

#include <cstddef>
#include <string>
#include <string_view>

namespace graphprobe::compare {

class TextFeed {
 public:
  // Opens `path`; throws fs::IoError when it cannot be opened or read, and
  // DumpFormatError when the first piece holds a NUL byte. A mapped file's
  // occurrences of `count_needle` are counted in the same pass as its NUL
  // check (count() then answers for it without another pass).
  explicit TextFeed(const std::string& path, std::string_view count_needle = {});
  ~TextFeed();
  TextFeed(const TextFeed&) = delete;
  TextFeed& operator=(const TextFeed&) = delete;

  // The whole file's extent; bytes past loaded() read as NUL.
  std::string_view text() const { return {data_, size_}; }
  size_t loaded() const { return loaded_; }
  // Reads the next piece (each twice the last); false when all is read.
  // Throws DumpFormatError when the piece holds a NUL byte.
  bool more();
  // Gives back the pages wholly before `offset`.
  void release(size_t offset);
  // How often `needle` occurs in the file, read once in pieces; throws
  // DumpFormatError at a NUL byte.
  size_t count(std::string_view needle) const;
  // Some of the mapped file read as zeros: it shrank after it was opened.
  bool shrank() const;
  // Throws DumpFormatError, naming the file and both sizes, when it shrank.
  void check_intact() const;

 private:
  // Pieces of the NUL check and of count().
  static constexpr size_t kPiece = size_t{4} << 20;
  bool map_file(size_t size);

  std::string path_;
  int fd_ = -1;
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t loaded_ = 0;
  size_t released_ = 0;
  size_t piece_ = size_t{16} << 20;
  int guard_ = -1;  // mapped_file_guard.h's slot
  bool mapped_ = false;
  std::string count_needle_;
  size_t counted_ = 0;  // count_needle_'s occurrences, counted by map_file()
};

}  // namespace graphprobe::compare
