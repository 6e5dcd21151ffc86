// Line-oriented logging to stderr and, optionally, a file.
//
// Each line is written with one write(2) so lines from different threads and
// processes never interleave. Any thread. Not for the per-signal hot path:
// formatting costs microseconds.
#pragma once

#include <string>

namespace fjord {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError };

void log_set_level(LogLevel level);
// Also append every line to this file (created 0644). Empty path: stderr only.
bool log_set_file(const std::string& path);
// A short tag printed on every line, e.g. "ndbd 1" or "bench-server".
void log_set_tag(const std::string& tag);
void log_set_stderr(bool enabled);

void log_line(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace fjord

#define FJORD_LOG_DEBUG(...) ::fjord::log_line(::fjord::LogLevel::kDebug, __VA_ARGS__)
#define FJORD_LOG_INFO(...) ::fjord::log_line(::fjord::LogLevel::kInfo, __VA_ARGS__)
#define FJORD_LOG_WARN(...) ::fjord::log_line(::fjord::LogLevel::kWarn, __VA_ARGS__)
#define FJORD_LOG_ERROR(...) ::fjord::log_line(::fjord::LogLevel::kError, __VA_ARGS__)
