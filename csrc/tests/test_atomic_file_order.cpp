// The order of the system calls behind an atomic file: the data
// must be on disk (fsync of the temporary file) before the rename makes it
// the final name, and the folder is flushed after the rename. Renaming first
// would let a crash leave the final name pointing at an empty or partial
// file. fsync and rename are interposed here: this executable defines them,
// so the library's calls land in these recorders, which then make the real
// system calls.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "check.h"
#include "fs/atomic_file.h"

namespace fs = graphprobe::fs;

namespace {

std::vector<std::string>& events() {
  static std::vector<std::string> e;
  return e;
}

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

std::string fd_target(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  return n < 0 ? std::string("?") : std::string(buf, static_cast<size_t>(n));
}

}  // namespace

extern "C" int fsync(int fd) {
  struct stat st;
  const bool dir = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
  events().push_back(std::string(dir ? "fsync dir " : "fsync file ") + base_name(fd_target(fd)));
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

extern "C" int rename(const char* from, const char* to) {
  events().push_back("rename " + base_name(from) + " -> " + base_name(to));
  return ::renameat(AT_FDCWD, from, AT_FDCWD, to);
}

namespace {

void run() {
  const char* base = std::getenv("GRAPHPROBE_TEST_TMP");
  const std::string root = std::string(base ? base : "/tmp") + "/atomic_order_" + std::to_string(::getpid());
  fs::make_dirs(root);
  const std::string dir_name = base_name(root);

  for (int pieces : {1, 3}) {
    events().clear();
    const std::string file = root + "/data" + std::to_string(pieces) + ".json";
    if (pieces == 1) {
      fs::write_file_atomic(file, std::string("payload"));
    } else {
      fs::AtomicFile f(file);
      for (int i = 0; i < pieces; ++i) f.append(std::string("piece"));
      f.commit();
    }
    // Exactly: flush the temporary file, rename it, flush the folder.
    CHECK_EQ(events().size(), 3u);
    if (events().size() != 3) continue;
    const std::string tmp = base_name(fs::temporary_name(file, 0));
    const std::string tmp_prefix = tmp.substr(0, tmp.find(".tmp.") + 5);
    CHECK(events()[0].rfind("fsync file " + tmp_prefix, 0) == 0);  // the data, under its temporary name
    const std::string flushed = events()[0].substr(std::string("fsync file ").size());
    CHECK_EQ(events()[1], "rename " + flushed + " -> " + base_name(file));
    CHECK_EQ(events()[2], "fsync dir " + dir_name);
    for (const auto& e : events()) std::fprintf(stderr, "  %s\n", e.c_str());
  }
  std::string cleanup = "rm -rf '" + root + "'";
  CHECK(std::system(cleanup.c_str()) == 0);
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run)
