// Implementations of the small shared primitives in fjord/base/.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "fjord/base/assert.h"
#include "fjord/base/crc32c.h"
#include "fjord/base/log.h"
#include "fjord/base/status.h"

namespace fjord {
namespace detail {

void assert_fail(const char* condition, const char* file, int line, const char* message) noexcept {
  char buf[1024];
  const int n = std::snprintf(buf, sizeof buf, "fjord: assertion failed: %s at %s:%d%s%s\n", condition, file, line,
                              message ? ": " : "", message ? message : "");
  if (n > 0) {
    [[maybe_unused]] ssize_t ignored = ::write(2, buf, static_cast<size_t>(n) < sizeof buf ? n : sizeof buf - 1);
  }
  std::abort();
}

}  // namespace detail

const char* status_code_name(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kAlreadyExists: return "already exists";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kRejected: return "rejected";
    case StatusCode::kLinkDown: return "link down";
    case StatusCode::kProtocolError: return "protocol error";
    case StatusCode::kTimeout: return "timeout";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status io_error(const std::string& what, int err) {
  return Status(StatusCode::kIoError, what + ": " + std::strerror(err));
}

// ---- crc32c -------------------------------------------------------------

namespace {
struct Crc32cTable {
  uint32_t t[8][256];
  Crc32cTable() {
    constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};
const Crc32cTable kCrcTable;
}  // namespace

uint32_t crc32c(const void* data, std::size_t bytes, uint32_t seed) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~seed;
  const auto& t = kCrcTable.t;
  while (bytes >= 8) {  // slicing-by-8
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
        t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    bytes -= 8;
  }
  while (bytes--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
  return ~c;
}

// ---- logging ------------------------------------------------------------

namespace {
struct LogState {
  std::mutex mutex;  // guards the settings, not the writes (each line is one write)
  LogLevel level = LogLevel::kInfo;
  int file_fd = -1;
  bool to_stderr = true;
  std::string tag;
};
LogState& log_state() {
  static LogState state;
  return state;
}
}  // namespace

void log_set_level(LogLevel level) {
  std::lock_guard lock(log_state().mutex);
  log_state().level = level;
}

bool log_set_file(const std::string& path) {
  std::lock_guard lock(log_state().mutex);
  if (log_state().file_fd >= 0) ::close(log_state().file_fd);
  log_state().file_fd = -1;
  if (path.empty()) return true;
  log_state().file_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  return log_state().file_fd >= 0;
}

void log_set_tag(const std::string& tag) {
  std::lock_guard lock(log_state().mutex);
  log_state().tag = tag;
}

void log_set_stderr(bool enabled) {
  std::lock_guard lock(log_state().mutex);
  log_state().to_stderr = enabled;
}

void log_line(LogLevel level, const char* format, ...) {
  LogState& s = log_state();
  int file_fd;
  bool to_stderr;
  std::string tag;
  {
    std::lock_guard lock(s.mutex);
    if (level < s.level) return;
    file_fd = s.file_fd;
    to_stderr = s.to_stderr;
    tag = s.tag;
  }
  static const char* const kNames[] = {"DEBUG", "INFO", "WARN", "ERROR"};
  char buf[2048];
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm local;
  localtime_r(&ts.tv_sec, &local);
  int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%03ld [%s]%s%s ", local.tm_year + 1900,
                        local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec,
                        ts.tv_nsec / 1000000, kNames[static_cast<int>(level)], tag.empty() ? "" : " ", tag.c_str());
  va_list args;
  va_start(args, format);
  const int m = std::vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, format, args);
  va_end(args);
  n = std::min<int>(n + std::max(m, 0), static_cast<int>(sizeof buf) - 2);
  buf[n++] = '\n';
  if (to_stderr) {
    [[maybe_unused]] ssize_t a = ::write(2, buf, static_cast<size_t>(n));
  }
  if (file_fd >= 0) {
    [[maybe_unused]] ssize_t b = ::write(file_fd, buf, static_cast<size_t>(n));
  }
}

}  // namespace fjord
