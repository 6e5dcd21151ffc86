// DescriptorsUsedUp: while it lives, the test process can open no file
// descriptor (open, socket, accept fail with EMFILE). The soft limit is
// lowered to at most 4096 first, so that filling it is quick; both the
// descriptors and the limit are given back at the end.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "fjord/base/fd.h"

namespace fjord::test {

class DescriptorsUsedUp {
 public:
  DescriptorsUsedUp() {
    EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &saved_), 0);
    rlimit lower = saved_;
    lower.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, 4096);
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &lower), 0);
    for (int fd; (fd = ::dup(2)) >= 0;) held_.emplace_back(fd);
    EXPECT_EQ(errno, EMFILE) << "dup stopped for another reason: " << std::strerror(errno);
  }
  ~DescriptorsUsedUp() { release(); }
  DescriptorsUsedUp(const DescriptorsUsedUp&) = delete;
  DescriptorsUsedUp& operator=(const DescriptorsUsedUp&) = delete;

  // Gives the descriptors and the limit back before the end of the scope.
  void release() {
    if (released_) return;
    released_ = true;
    held_.clear();
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }

 private:
  rlimit saved_{};
  std::vector<UniqueFd> held_;
  bool released_ = false;
};

}  // namespace fjord::test
