// Atomic files: complete content, modes, symlinks not followed, clear errors.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "check.h"
#include "fs/atomic_file.h"

namespace fs = graphprobe::fs;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string tmp_root() {
  const char* base = std::getenv("GRAPHPROBE_TEST_TMP");
  std::string dir = std::string(base ? base : "/tmp") + "/atomic_file_test_" + std::to_string(::getpid());
  return dir;
}

void run() {
  const std::string root = tmp_root();
  fs::make_dirs(root + "/a/b/c");
  struct stat st;
  CHECK(::stat((root + "/a/b/c").c_str(), &st) == 0 && S_ISDIR(st.st_mode));
  CHECK_EQ(st.st_mode & 0777, 0750u & ~static_cast<unsigned>(::umask(022)) & 0777);

  const std::string file = root + "/a/b/c/data.json";
  fs::write_file_atomic(file, std::string("first"));
  fs::write_file_atomic(file, std::string("second, longer"));
  CHECK_EQ(read_all(file), std::string("second, longer"));
  CHECK(::stat(file.c_str(), &st) == 0);
  CHECK_EQ(st.st_mode & 0777, 0640u & ~static_cast<unsigned>(::umask(022)) & 0777);

  // A symbolic link at the final name is replaced, not written through.
  const std::string victim = root + "/victim.txt";
  fs::write_file_atomic(victim, std::string("keep"));
  const std::string link = root + "/a/link.json";
  CHECK(::symlink(victim.c_str(), link.c_str()) == 0);
  fs::write_file_atomic(link, std::string("new"));
  CHECK_EQ(read_all(victim), std::string("keep"));
  CHECK(::lstat(link.c_str(), &st) == 0 && S_ISREG(st.st_mode));

  // Legal names up to NAME_MAX (255 bytes) write, though the temporary
  // name's ".tmp.<pid>.<n>" would not fit after them; a
  // multi-byte character at the cut is dropped whole.
  for (const std::string unit : {"n", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}) {
    for (size_t length : {240u, 245u, 250u, 255u}) {
      std::string name;
      while (name.size() + unit.size() <= length) name += unit;
      const std::string path = root + "/" + name;
      fs::write_file_atomic(path, std::string("long"));
      CHECK_EQ(read_all(path), std::string("long"));
      CHECK(::unlink(path.c_str()) == 0);
      const std::string tmp = fs::temporary_name(path, 7);
      const std::string tmp_name = tmp.substr(root.size() + 1);
      CHECK(tmp_name.size() <= fs::kNameMax);
      const std::string stem = tmp_name.substr(0, tmp_name.find(".tmp."));
      CHECK(stem.size() % unit.size() == 0);  // whole characters only
      CHECK(name.compare(0, stem.size(), stem) == 0);
    }
  }
  CHECK_EQ(fs::temporary_name(root + "/short.json", 3), root + "/short.json.tmp." + std::to_string(::getpid()) + ".3");

  CHECK_THROWS(fs::IoError, fs::write_file_atomic(root + "/missing/x.json", std::string("x")), "missing/x.json");
  CHECK_THROWS(fs::IoError, fs::make_dirs(victim + "/sub"), "victim.txt");
  std::string cleanup = "rm -rf '" + root + "'";
  CHECK(std::system(cleanup.c_str()) == 0);
}

}  // namespace

GRAPHPROBE_TEST_MAIN(run)
