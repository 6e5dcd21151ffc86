// What the signal codecs of this library share: building refusals, checking
// a signal's shape against its layout, reading and writing words by their
// names in fjord/engine/protocol/layout.h. Private to the protocol library.
//
// Pure functions; any thread. Hot path: shape(), section_of(), tx_of(),
// Out and read_op_bits() (inline; their Status is built only on failure).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fjord/engine/protocol.h"

namespace fjord::engine::protocol::detail {

// Refusals, worded: "signal <number>: <what>". Off the hot path, defined
// once in signal_codec.cpp.
[[gnu::cold]] Status bad(uint16_t number, const std::string& what);
// What is wrong with a signal's shape, once shape() found it wrong.
[[gnu::cold]] Status shape_error(const Signal& s, uint16_t number, std::size_t words, std::size_t max_sections);
// What is wrong with an operation word, once read_op_bits() found it wrong.
[[gnu::cold]] std::string op_bits_fault(uint32_t word);
[[gnu::cold]] Status op_bits_error(uint16_t number, uint32_t word);
[[gnu::cold]] Status node_error(uint16_t number, uint32_t node);
// A refusal's error code: known, and not kNone.
Status check_error_code(uint16_t number, uint32_t code);

// Checks a signal's shape: its number, exactly `words` data words, and at
// most `max_sections` sections. Inline, its Status built only on failure:
// in a decoder of every key operation the check is three compares, after
// which the compiler knows every word the decoder reads is there.
inline Status shape(const Signal& s, uint16_t number, std::size_t words, std::size_t max_sections) {
  if (s.number() == number && s.word_count() == words && s.section_count() <= max_sections) [[likely]]
    return Status::ok();
  return shape_error(s, number, words, max_sections);
}
// The shape of layout L.
template <typename L>
[[gnu::always_inline]] inline Status shape(const Signal& s, uint16_t number) {
  return shape(s, number, L::kWordCount, L::kSectionCount);
}

// The helpers below that read words are always inlined, as the reads they
// stand for: inlined late, they would hide from the compiler that shape()
// already checked the words, and each read would check again.
//
// Section `at` of layout L, empty when the signal stops before it (trailing
// empty sections are not sent). Call after shape<L>().
template <typename L>
[[gnu::always_inline]] inline std::span<const std::byte> section_of(const Signal& s, typename L::Section at) {
  return at < s.section_count() ? s.section(at) : std::span<const std::byte>();
}

template <typename L>
[[gnu::always_inline]] inline TxId tx_of(const Signal& s) {
  return TxId::from(s.word(L::kTxHi), s.word(L::kTxLo));
}

// Fills a SignalOut by layout L: each word set by its name, each section at
// its place. done() checks that every word of L was set (inlined into each
// encoder, the mask is a constant and the check folds away).
template <typename L>
class Out {
  static_assert(L::kWordCount <= frame::kMaxDataWords);
  static_assert(L::kSectionCount <= frame::kMaxSections);

 public:
  explicit Out(uint16_t number) {
    m_.number = number;
    m_.word_count = L::kWordCount;
  }
  Out& w(typename L::Word at, uint32_t value) {
    m_.words[at] = value;
    set_ |= 1u << at;
    return *this;
  }
  Out& tx(TxId t) { return w(L::kTxHi, t.hi()).w(L::kTxLo, t.lo()); }
  // Sections, set in their layout's order, keep their position: an empty
  // one before a non-empty one is still sent; empty ones at the end are not.
  Out& section(typename L::Section at, std::span<const std::byte> bytes) {
    FJORD_ASSERT(at >= next_section_);  // a constant when inlined: folds away
    next_section_ = at + 1;
    m_.sections[at] = bytes;
    if (!bytes.empty()) m_.section_count = static_cast<uint8_t>(at + 1);
    return *this;
  }
  SignalOut done() const {
    FJORD_ASSERT(set_ == kEveryWord);
    return m_;
  }

 private:
  static constexpr uint32_t kEveryWord = (1u << L::kWordCount) - 1;  // kWordCount <= kMaxDataWords < 32
  SignalOut m_;
  uint32_t set_ = 0;
  uint32_t next_section_ = 0;
};

template <typename E>
inline bool in_range(uint32_t v, E lo, E hi) {
  return v >= static_cast<uint32_t>(lo) && v <= static_cast<uint32_t>(hi);
}

// The inverse of op_bits(). Inline, its Status built only on failure (as shape()).
inline Status read_op_bits(uint16_t number, uint32_t word, OpType& op, LockMode& lock) {
  static_assert(static_cast<uint32_t>(LockMode::kCommitted) == 0, "the lock mode's range starts at 0");
  const uint32_t o = word & 0xFF;
  // The lock mode with the reserved bits above it: one compare checks both.
  const uint32_t l = word >> 8;
  if (!in_range(o, OpType::kRead, OpType::kDelete) || l > static_cast<uint32_t>(LockMode::kExclusive)) [[unlikely]]
    return op_bits_error(number, word);
  op = static_cast<OpType>(o);
  lock = static_cast<LockMode>(l);
  return Status::ok();
}

// A node id: a real node (1..kMaxNodeId). Inline, as shape().
inline Status check_node(uint16_t number, uint32_t node) {
  if (node == kNoNode || node > kMaxNodeId) [[unlikely]]
    return node_error(number, node);
  return Status::ok();
}

}  // namespace fjord::engine::protocol::detail
