// A private directory of cluster key files (ClusterKeyFile), removed with
// its contents when the object goes.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace fjord::test {

class KeyFiles {
 public:
  KeyFiles() {
    std::string pattern = (std::filesystem::temp_directory_path() / "fjord-keys-XXXXXX").string();
    const char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    dir_ = made ? made : "";
  }
  ~KeyFiles() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  KeyFiles(const KeyFiles&) = delete;
  KeyFiles& operator=(const KeyFiles&) = delete;

  const std::string& path() const { return dir_; }

  // Writes `content` to `name` with `mode`; returns its path.
  std::string write(const std::string& name, const std::string& content, mode_t mode = 0600) const {
    const std::string path = dir_ + "/" + name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0) << path;
    if (fd < 0) return path;
    EXPECT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    EXPECT_EQ(::fchmod(fd, mode), 0);
    ::close(fd);
    return path;
  }

 private:
  std::string dir_;
};

}  // namespace fjord::test
