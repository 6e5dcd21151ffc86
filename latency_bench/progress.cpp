#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include "fjord/base/clock.h"

namespace fjord::bench {
namespace {
constexpr uint64_t kRedrawNs = 200'000'000;
}

Progress::Progress(bool wanted) : enabled_(wanted && ::isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { clear(); }

void Progress::begin(std::string label, uint64_t total) {
  label_ = std::move(label);
  total_ = total;
  next_draw_ns_ = 0;
  update(0);
}

void Progress::update(uint64_t done) noexcept {
  if (!enabled_) return;
  const uint64_t now = monotonic_ns();
  if (now < next_draw_ns_) return;
  next_draw_ns_ = now + kRedrawNs;
  draw(done);
}

void Progress::draw(uint64_t done) noexcept {
  char line[160];
  const unsigned percent = total_ == 0 ? 0 : static_cast<unsigned>(done * 100 / total_);
  const int n = std::snprintf(line, sizeof line, "\r\033[K[latency_bench] %.100s: %3u%% (%llu/%llu)", label_.c_str(),
                              percent, static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_));
  if (n > 0) (void)!::write(STDERR_FILENO, line, static_cast<std::size_t>(n) < sizeof line ? n : sizeof line - 1);
  drawn_ = true;
}

void Progress::clear() noexcept {
  if (!enabled_ || !drawn_) return;
  (void)!::write(STDERR_FILENO, "\r\033[K", 4);
  drawn_ = false;
}

}  // namespace fjord::bench
