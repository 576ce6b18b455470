#include "compare/text_feed.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "compare/dump_reader.h"
#include "compare/mapped_file_guard.h"
#include "fs/atomic_file.h"

namespace graphprobe::compare {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw fs::IoError("graphprobe: cannot " + what + " '" + path + "': " + std::strerror(err));
}

size_t read_at(int fd, const std::string& path, char* out, size_t size, size_t offset) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("read", path, errno);
    }
    if (n == 0) break;  // the file shrank: what is missing reads as NUL and fails to parse
    done += static_cast<size_t>(n);
  }
  return done;
}

// JSON never holds a NUL byte, not even inside a string; a file that does is
// torn or sparse (space allocated but never written, e.g. by a writer that
// crashed). Reported at once: the parser also reads bytes not yet loaded as
// NUL, so without this check it would load the whole file (a sparse file of
// any size) before it gave up at the first one.
[[noreturn]] void fail_nul(const std::string& path, size_t offset) {
  throw DumpFormatError(path + ": byte " + std::to_string(offset) +
                        " is a NUL byte, which JSON never holds: the file is torn or sparse (written only in part, "
                        "e.g. when the process writing it crashed); it is not a dump.json");
}

void check_no_nul(const std::string& path, const char* data, size_t size, size_t offset) {
  if (const void* p = std::memchr(data, '\0', size))
    fail_nul(path, offset + static_cast<size_t>(static_cast<const char*>(p) - data));
}

// How often `needle` occurs in `text`. string_view::find looks for the
// needle's first byte with memchr and then compares: a needle starting with
// '"' stops at every quote of a JSON text (one in ten bytes). Anchoring on
// the needle's byte that is rarest in the text's first 64 KiB instead ('y'
// of "type": a few per record) lets memchr skip a hundred bytes a call.
size_t count_in(std::string_view text, std::string_view needle) {
  if (needle.empty() || text.size() < needle.size()) return 0;
  const std::string_view sample = text.substr(0, size_t{64} << 10);
  size_t anchor = 0, fewest = SIZE_MAX;
  for (size_t i = 0; i < needle.size(); ++i) {
    const size_t seen = static_cast<size_t>(std::count(sample.begin(), sample.end(), needle[i]));
    if (seen < fewest) fewest = seen, anchor = i;
  }
  const char a = needle[anchor];
  size_t n = 0;
  const char* p = text.data() + anchor;
  const char* const last = text.data() + text.size() - (needle.size() - anchor - 1);  // past the last anchor
  while (p < last) {
    p = static_cast<const char*>(std::memchr(p, a, static_cast<size_t>(last - p)));
    if (p == nullptr) break;
    if (std::memcmp(p - anchor, needle.data(), needle.size()) == 0) ++n;
    ++p;
  }
  return n;
}

}  // namespace

TextFeed::TextFeed(const std::string& path, std::string_view count_needle)
    : path_(path), count_needle_(count_needle) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("open", path, errno);
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail("read", path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fail("read", path, EISDIR);
  }
  size_t size = static_cast<size_t>(std::max<off_t>(st.st_size, 0));
  if (!S_ISREG(st.st_mode) || size == 0) {
    // A pipe or an empty file: read it whole, into a mapping that grows.
    std::string text;
    char buf[1 << 16];
    for (size_t at = 0;; at = text.size()) {
      ssize_t n;
      do n = ::read(fd_, buf, sizeof(buf));
      while (n < 0 && errno == EINTR);
      if (n < 0) {
        const int err = errno;
        ::close(fd_);
        fail("read", path, err);
      }
      if (n == 0) break;
      if (std::memchr(buf, '\0', static_cast<size_t>(n)) != nullptr) {
        ::close(fd_);
        check_no_nul(path, buf, static_cast<size_t>(n), at);
      }
      text.append(buf, static_cast<size_t>(n));
    }
    size = text.size();
    if (size > 0) {
      data_ = static_cast<char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      if (data_ == MAP_FAILED) {
        data_ = nullptr;
        ::close(fd_);
        throw std::bad_alloc();
      }
      std::memcpy(data_, text.data(), size);
    }
    size_ = loaded_ = size;
    return;
  }
  if (map_file(size)) return;
  data_ = static_cast<char*>(
      ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    ::close(fd_);
    throw std::bad_alloc();
  }
  size_ = size;
  // Huge pages where the system grants them on request: the text is read
  // in pieces of 16 MiB and more, and a page fault per 4 KiB was a tenth of
  // the read (2 x 20 MB in fresh processes: both reads 0.18 -> 0.14 s CPU).
  // Only advice: nothing changes where it is not taken.
  ::madvise(data_, size_, MADV_HUGEPAGE);
  try {
    more();
  } catch (...) {
    // No destructor runs for a constructor that throws.
    ::munmap(data_, size_);
    data_ = nullptr;
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

bool TextFeed::map_file(size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (p == MAP_FAILED) return false;
  const int slot = guard_mapping(static_cast<const char*>(p), size);
  if (slot < 0) {
    ::munmap(p, size);
    return false;
  }
  data_ = static_cast<char*>(p);
  size_ = loaded_ = size;
  guard_ = slot;
  mapped_ = true;
  try {
    // Every byte checked for NUL before the parser starts, as the pieces
    // read used to be, and count_needle_ counted in the same pass (a piece's
    // last needle.size() - 1 bytes looked at again with the next one, no
    // match counted twice); each piece given back after it (the parser maps
    // its pages again from the page cache), so that no more than a piece is
    // held at a time.
    const size_t overlap = count_needle_.empty() ? 0 : count_needle_.size() - 1;
    for (size_t at = 0; at < size_; at += kPiece) {
      const size_t n = std::min(kPiece, size_ - at);
      if (const void* nul = std::memchr(data_ + at, '\0', n)) {
        check_intact();
        fail_nul(path_, at + static_cast<size_t>(static_cast<const char*>(nul) - (data_ + at)));
      }
      if (!count_needle_.empty())
        counted_ += count_in(text().substr(at, std::min(n + overlap, size_ - at)), count_needle_);
      ::madvise(data_ + at, n, MADV_DONTNEED);
    }
  } catch (...) {
    // No destructor runs for a constructor that throws.
    unguard_mapping(guard_);
    ::munmap(data_, size_);
    data_ = nullptr;
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  return true;
}

bool TextFeed::shrank() const { return mapped_ && mapping_shrank(guard_); }

void TextFeed::check_intact() const {
  if (!shrank()) return;
  struct stat st;
  const std::string now = ::fstat(fd_, &st) == 0 ? " to " + std::to_string(st.st_size) + " bytes" : "";
  throw DumpFormatError(path_ + ": the file shrank" + now + " while it was read (it had " + std::to_string(size_) +
                        "): another process truncated or rewrote it; compare it again once it is complete");
}

TextFeed::~TextFeed() {
  if (guard_ >= 0) unguard_mapping(guard_);
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

bool TextFeed::more() {
  if (loaded_ >= size_) return false;
  const size_t n = std::min(piece_, size_ - loaded_);
  const size_t got = read_at(fd_, path_, data_ + loaded_, n, loaded_);
  // Only what was read: a file that shrank leaves the rest NUL, which the
  // parser reports as the end of the text it got.
  check_no_nul(path_, data_ + loaded_, got, loaded_);
  loaded_ += n;
  piece_ *= 2;
  return true;
}

void TextFeed::release(size_t offset) {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t end = std::min(offset, loaded_) / page * page;
  if (end <= released_) return;
  // Anonymous pages: given back to the system; they would read as zeros.
  ::madvise(data_ + released_, end - released_, MADV_DONTNEED);
  released_ = end;
}

size_t TextFeed::count(std::string_view needle) const {
  if (size_ == 0 || needle.empty()) return 0;
  if (mapped_ && needle == count_needle_) return counted_;
  if (mapped_) {
    // Piece by piece, each given back after it; a piece's last needle.size()
    // - 1 bytes are looked at again with the next one, no match counted twice.
    size_t n = 0;
    for (size_t at = 0; at < size_; at += kPiece) {
      const size_t len = std::min(kPiece + needle.size() - 1, size_ - at);
      n += count_in(text().substr(at, len), needle);
      ::madvise(data_ + at, std::min(kPiece, size_ - at), MADV_DONTNEED);
    }
    return n;
  }
  if (loaded_ == size_) return count_in(text(), needle);
  // Pieces overlapping by needle.size() - 1 bytes, none counted twice.
  std::vector<char> buf(kPiece + needle.size());
  size_t n = 0, carry = 0;
  for (size_t at = 0; at < size_;) {
    const size_t got = read_at(fd_, path_, buf.data() + carry, std::min(kPiece, size_ - at), at);
    if (got == 0) break;
    check_no_nul(path_, buf.data() + carry, got, at);
    const std::string_view piece(buf.data(), carry + got);
    n += count_in(piece, needle);
    at += got;
    carry = std::min(needle.size() - 1, piece.size());
    std::memmove(buf.data(), piece.data() + piece.size() - carry, carry);
  }
  return n;
}

}  // namespace graphprobe::compare
