// Signals captured by test doubles, and a queue a test thread takes them
// from. Doubles push from their block's thread; the test thread waits in
// take() or looks in drain(). Not on any hot path.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "fjord/engine/protocol.h"  // Signal
#include "fjord/transport/frame.h"

namespace fjord::engine::test {

// How long take() waits: a hang, not a timing assertion.
inline constexpr std::chrono::seconds kSignalWait{60};

// A captured signal, owning its frame.
struct Captured {
  NodeId sender_node = kNoNode;
  std::vector<std::byte> frame;
  uint16_t number() const { return signal().number(); }
  Signal signal() const {
    Signal s;
    s.sender_node = sender_node;
    frame::decode_validated(frame, s.view);
    return s;
  }
};

inline Captured capture(const Signal& s) {
  Captured c;
  c.sender_node = s.sender_node;
  std::span<const std::byte> sections[frame::kMaxSections];
  for (std::size_t i = 0; i < s.section_count(); ++i) sections[i] = s.section(i);
  std::vector<uint32_t> words(s.word_count());
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = s.word(i);
  c.frame.resize(frame::kMaxFrameBytes);
  const std::size_t n = frame::pack_frame(c.frame, s.view.header, words, {sections, s.section_count()}, false);
  c.frame.resize(n);
  return c;
}

// A thread-safe queue of captured signals.
class Inbox {
 public:
  void push(Captured c) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(c));
    }
    cv_.notify_all();
  }
  // Removes and returns the first signal matching `pred`, waiting for it.
  Captured take(const std::function<bool(const Captured&)>& pred) {
    std::unique_lock lock(mutex_);
    std::optional<Captured> found;
    const bool ok = cv_.wait_for(lock, kSignalWait, [&] {
      for (auto it = queue_.begin(); it != queue_.end(); ++it)
        if (pred(*it)) {
          found = std::move(*it);
          queue_.erase(it);
          return true;
        }
      return false;
    });
    if (!ok) ADD_FAILURE() << "no matching signal arrived (a hang)";
    return found.value_or(Captured{});
  }
  // Removes and returns matching signals already here (no waiting).
  std::vector<Captured> drain(const std::function<bool(const Captured&)>& pred) {
    std::lock_guard lock(mutex_);
    std::vector<Captured> out;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (pred(*it)) {
        out.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Captured> queue_;
};

}  // namespace fjord::engine::test
