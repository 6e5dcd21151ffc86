// A one-line progress indicator on stderr, shown only when stderr is a
// terminal (never in pipes, files or tests), redrawn at most five times a
// second.
//
// One thread. update() is called from measurement loops: it reads the clock
// and returns unless a redraw is due; a redraw formats into a fixed buffer
// and makes one write(2). No allocation after construction.
#pragma once

#include <cstdint>
#include <string>

namespace fjord::bench {

class Progress {
 public:
  // Shows nothing unless `wanted` and stderr is a terminal.
  explicit Progress(bool wanted);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();

  // Starts a phase: "tcp busy ping" with `total` steps.
  void begin(std::string label, uint64_t total);
  void update(uint64_t done) noexcept;
  // Erases the line.
  void clear() noexcept;
  bool enabled() const { return enabled_; }

 private:
  void draw(uint64_t done) noexcept;

  bool enabled_;
  bool drawn_ = false;
  std::string label_;
  uint64_t total_ = 0;
  uint64_t next_draw_ns_ = 0;
};

}  // namespace fjord::bench
