#pragma once
// Files that appear complete or not at all. Torch-free.
//
// Data goes to a temporary file in the destination folder, is flushed to
// disk, and is renamed over the final name: a process killed at any moment
// leaves either the previous state or the whole new file. rename() replaces a
// symbolic link at the final name instead of writing through it.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace graphprobe::fs {

// A failed file-system operation; the message names the path and the cause.
class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr mode_t kDirMode = 0750;
constexpr mode_t kFileMode = 0640;

// mkdir -p with kDirMode for the folders it creates.
void make_dirs(const std::string& path);

// The longest file name (bytes) Linux file systems take.
constexpr size_t kNameMax = 255;

// The temporary name of `path`'s n-th AtomicFile in this process: beside it,
// `path` + ".tmp.<pid>.<n>", the final name cut (on a UTF-8 character
// boundary) where that would exceed kNameMax.
std::string temporary_name(const std::string& path, uint64_t n);

// A file written in pieces that appears complete or not at all: append()
// writes to a temporary file beside `path`, commit() flushes it and renames
// it over `path`. Destroyed without commit(), the temporary file is removed.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void append(const void* data, size_t size);
  void append(const std::string& text) { append(text.data(), text.size()); }
  void commit();

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
};

void write_file_atomic(const std::string& path, const void* data, size_t size);
inline void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, text.data(), text.size());
}

}  // namespace graphprobe::fs
