// Little-endian byte writer and bounds-checked reader for the small binary
// messages decoded from outside bytes (handshakes, table definitions). A
// read past the end fails and leaves the reader at the end; nothing is ever
// read past the input. Slow path; single-threaded objects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace fjord {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "byte_io writes the host's order, which must be little-endian");

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(std::byte{v}); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  // A u16 length, then the bytes.
  void str16(const std::string& s) {
    u16(static_cast<uint16_t>(s.size()));
    raw(s.data(), s.size());
  }
  // Overwrites a u16 already written at `offset` (e.g. a total length).
  void patch_u16(std::size_t offset, uint16_t v) { std::memcpy(out_.data() + offset, &v, 2); }
  std::size_t size() const { return out_.size(); }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> in) : in_(in) {}
  bool u8(uint8_t& v) { return raw(&v, 1); }
  bool u16(uint16_t& v) { return raw(&v, 2); }
  bool u32(uint32_t& v) { return raw(&v, 4); }
  bool raw(void* p, std::size_t n) {
    if (n > in_.size() - pos_) {
      pos_ = in_.size();
      return false;
    }
    if (n) std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  // A u16 length (at most max_bytes), then the bytes.
  bool str16(std::string& s, std::size_t max_bytes) {
    uint16_t n;
    if (!u16(n) || n > max_bytes || n > in_.size() - pos_) return false;
    s.assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool at_end() const { return pos_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
};

}  // namespace fjord
