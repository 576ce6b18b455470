#include "fs/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace graphprobe::fs {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw IoError("graphprobe: cannot " + what + " '" + path + "': " + std::strerror(err));
}

std::string parent_of(const std::string& path) {
  const auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

// Closes the descriptor on every path out of a function.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

}  // namespace

void make_dirs(const std::string& path) {
  if (path.empty()) return;
  std::string cur;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    cur = path.substr(0, next);
    pos = next + 1;
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), kDirMode) != 0 && errno != EEXIST) fail("create folder", cur, errno);
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail("create folder", path, errno);
  if (!S_ISDIR(st.st_mode)) fail("use as a folder", path, ENOTDIR);
}

std::string temporary_name(const std::string& path, uint64_t n) {
  const std::string suffix = ".tmp." + std::to_string(::getpid()) + "." + std::to_string(n);
  const auto slash = path.find_last_of('/');
  const size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  const size_t room = kNameMax - suffix.size();
  if (path.size() - name_start <= room) return path + suffix;
  // A final name near NAME_MAX (legal) leaves no room for the suffix: cut
  // it, never inside a UTF-8 character, so the temporary name stays legal.
  size_t end = name_start + room;
  size_t start = end - 1;
  while (start > name_start && (static_cast<unsigned char>(path[start]) & 0xC0) == 0x80) --start;
  const auto lead = static_cast<unsigned char>(path[start]);
  const size_t size = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (end - start < size) end = start;
  return path.substr(0, end) + suffix;
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // A per-process counter keeps temporary names unique across threads; the
  // pid keeps them unique across ranks writing into one folder.
  static std::atomic<uint64_t> counter{0};
  tmp_ = temporary_name(path_, counter++);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode);
  if (fd_ < 0) fail("create", tmp_, errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::append(const void* data, size_t size) {
  if (fd_ < 0) throw IoError("graphprobe: '" + path_ + "' was already committed");
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", path_, errno);  // the destructor removes the temporary file
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw IoError("graphprobe: '" + path_ + "' was already committed");
  if (::fsync(fd_) != 0) fail("flush", path_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    fail("close", path_, err);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    fail("rename into", path_, err);
  }
  // Make the rename itself durable.
  Fd dir(::open(parent_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  AtomicFile file(path);
  file.append(data, size);
  file.commit();
}

}  // namespace graphprobe::fs
