#include "probe/proc_maps.h"

#include <dirent.h>
#include <glob.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ingero::hal {
namespace {

bool parse_hex(std::string_view& s, uint64_t& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  if (r.ec != std::errc()) return false;
  s.remove_prefix(size_t(r.ptr - s.data()));
  return true;
}
bool parse_dec(std::string_view& s, uint64_t& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out, 10);
  if (r.ec != std::errc()) return false;
  s.remove_prefix(size_t(r.ptr - s.data()));
  return true;
}
bool eat(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}
void skip_spaces(std::string_view& s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
}

}  // namespace

std::vector<MapEntry> parse_proc_maps(std::string_view text) {
  std::vector<MapEntry> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    MapEntry m;
    uint64_t maj = 0, min = 0;
    if (!parse_hex(line, m.start) || !eat(line, '-') || !parse_hex(line, m.end) ||
        !eat(line, ' ') || line.size() < 5)
      continue;
    for (int i = 0; i < 4; ++i) m.perms[i] = line[i];
    line.remove_prefix(4);
    if (!eat(line, ' ') || !parse_hex(line, m.offset) || !eat(line, ' ') || !parse_hex(line, maj) ||
        !eat(line, ':') || !parse_hex(line, min) || !eat(line, ' ') || !parse_dec(line, m.inode))
      continue;
    m.dev_major = uint32_t(maj);
    m.dev_minor = uint32_t(min);
    skip_spaces(line);
    std::string_view path = line;
    if (path.size() > kDeletedMark.size() && path.ends_with(kDeletedMark)) {
      m.deleted = true;
      path.remove_suffix(kDeletedMark.size());
    }
    m.path = std::string(path);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<int> LocalHost::pids() const {
  std::vector<int> out;
  DIR* d = opendir(proc_.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    int pid = 0;
    auto r = std::from_chars(e->d_name, e->d_name + strlen(e->d_name), pid);
    if (r.ec == std::errc() && *r.ptr == 0 && pid > 0) out.push_back(pid);
  }
  closedir(d);
  return out;
}

Result<std::string> LocalHost::read_text(const std::string& path) const {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::sys("open " + path, errno);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Error::sys("read " + path, errno);
  return ss.str();
}

Result<FileIdentity> LocalHost::identify(const std::string& path) const {
  return identify_file(path);
}

std::vector<std::string> LocalHost::glob(const std::string& pattern) const {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  return out;
}

std::string LocalHost::env(const char* name) const {
  const char* v = getenv(name);
  return v ? v : "";
}

Result<std::string> LocalHost::readlink(const std::string& path) const {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) return Error::sys("readlink " + path, errno);
  return std::string(buf, size_t(n));
}

}  // namespace ingero::hal
