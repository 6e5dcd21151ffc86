// Signal framing: round trips, exact sizes, and every way a frame can be bad.
#include "fjord/transport/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace fjord::frame {
namespace {

std::vector<std::byte> bytes_of(const char* s) {
  std::vector<std::byte> out;
  for (; *s; ++s) out.push_back(static_cast<std::byte>(*s));
  return out;
}

TEST(FrameTest, PackThenUnpackRoundTripsEveryField) {
  const uint32_t data[] = {1, 0xDEADBEEF, 42};
  const auto a = bytes_of("hello");
  const auto b = bytes_of("");
  const auto c = bytes_of("sections pad to four bytes");
  const std::span<const std::byte> sections[] = {a, b, c};
  for (bool checksum : {false, true}) {
    std::vector<std::byte> buf(256);
    const SignalHeader h{513, {250, 3}, {17, 65535}, 0xABCDEF01};
    const std::size_t n = pack_frame(buf, h, data, sections, checksum);
    const std::size_t lengths[] = {5, 0, c.size()};
    ASSERT_EQ(n, frame_bytes_for(3, lengths, checksum));
    ASSERT_EQ(n % kFrameAlign, 0u);
    SignalView v;
    std::size_t len = 0;
    ASSERT_EQ(unpack_frame({buf.data(), n}, v, &len), FrameError::kNone);
    EXPECT_EQ(len, n);
    EXPECT_EQ(v.header.signal_number, 513);
    EXPECT_EQ(v.header.receiver, (BlockRef{250, 3}));
    EXPECT_EQ(v.header.sender, (BlockRef{17, 65535}));
    EXPECT_EQ(v.header.trace, 0xABCDEF01u);
    ASSERT_EQ(v.data_words, 3);
    EXPECT_EQ(v.word(1), 0xDEADBEEFu);
    ASSERT_EQ(v.section_count, 3);
    EXPECT_EQ(std::vector<std::byte>(v.sections[0].begin(), v.sections[0].end()), a);
    EXPECT_TRUE(v.sections[1].empty());
    EXPECT_EQ(std::vector<std::byte>(v.sections[2].begin(), v.sections[2].end()), c);
    SignalView d;
    EXPECT_EQ(decode_validated({buf.data(), n}, d), n);
    EXPECT_EQ(d.word(2), 42u);
    EXPECT_EQ(d.sections[2].size(), c.size());
  }
}

TEST(FrameTest, PackFrameZeroesEveryPadOverADirtyBuffer) {
  // Frames of 0-3 sections of every length modulo 4 (and empty), every
  // word count parity, with and without a checksum, packed over bytes of
  // 0xFF: every pad must be zero (unpack_frame checks them) and every part
  // must read back.
  std::mt19937 rng(11);
  for (int round = 0; round < 2000; ++round) {
    const bool checksum = rng() % 2 == 0;
    std::vector<uint32_t> data(rng() % (kMaxDataWords + 1));
    for (auto& w : data) w = static_cast<uint32_t>(rng());
    std::vector<std::vector<std::byte>> bodies(rng() % (kMaxSections + 1));
    for (auto& body : bodies) {
      body.resize(rng() % 5 == 0 ? 0 : rng() % 40);
      for (auto& b : body) b = static_cast<std::byte>(rng());
    }
    const std::vector<std::span<const std::byte>> sections(bodies.begin(), bodies.end());
    std::vector<std::byte> buf(512, std::byte{0xFF});
    const SignalHeader h{static_cast<uint16_t>(1 + rng() % 65535), {1, 2}, {3, 4}, 5};
    const std::size_t n = pack_frame(buf, h, data, sections, checksum);
    ASSERT_GT(n, 0u);
    SignalView v;
    ASSERT_EQ(unpack_frame({buf.data(), n}, v), FrameError::kNone) << "round " << round;
    ASSERT_EQ(v.data_words, data.size());
    for (std::size_t i = 0; i < data.size(); ++i) EXPECT_EQ(v.word(i), data[i]);
    ASSERT_EQ(v.section_count, bodies.size());
    for (std::size_t i = 0; i < bodies.size(); ++i)
      EXPECT_EQ(std::vector<std::byte>(v.sections[i].begin(), v.sections[i].end()), bodies[i]) << "round " << round;
    EXPECT_EQ(buf[n], std::byte{0xFF}) << "wrote past its frame";
    // The sized packer, given frame_bytes_for()'s answer, writes the same
    // bytes over a differently dirty buffer; both size functions agree.
    std::vector<std::size_t> lengths;
    for (const auto& body : bodies) lengths.push_back(body.size());
    ASSERT_EQ(frame_bytes_for(data.size(), sections, checksum), n);
    ASSERT_EQ(frame_bytes_for(data.size(), lengths, checksum), n);
    std::vector<std::byte> other(512, std::byte{0x5A});
    ASSERT_EQ(pack_frame_sized(other.data(), n, h, data, sections, checksum), n);
    const FrameRoute route = route_of_validated({buf.data(), n});
    EXPECT_EQ(route.signal_number, h.signal_number);
    EXPECT_EQ(route.receiver, h.receiver);
    EXPECT_EQ(route.frame_bytes, n);
    ASSERT_EQ(0, std::memcmp(buf.data(), other.data(), n)) << "round " << round;
    EXPECT_EQ(other[n], std::byte{0x5A}) << "wrote past its frame";
  }
}

TEST(FrameDeathTest, PackFrameSizedRefusesALengthThatIsNotTheFrames) {
  const uint32_t data[] = {1, 2, 3};
  const auto body = bytes_of("twelve bytes");
  const std::span<const std::byte> sections[] = {body};
  const std::size_t n = frame_bytes_for(3, sections, false);
  std::vector<std::byte> buf(256);
  EXPECT_DEATH(pack_frame_sized(buf.data(), n + kFrameAlign, {9, {1, 0}, {2, 0}, 0}, data, sections, false),
               "not this frame's length");
  EXPECT_DEATH(pack_frame_sized(buf.data(), n - kFrameAlign, {9, {1, 0}, {2, 0}, 0}, data, sections, false),
               "not this frame's length");
}

TEST(FrameTest, SmallFramesPackToTheSameBytesAsPackFrame) {
  // Every word count, headers with every field non-zero, over a dirty
  // buffer: the inline packer must write exactly pack_frame's bytes,
  // padding included.
  std::mt19937 rng(7);
  for (std::size_t words = 0; words <= kMaxDataWords; ++words) {
    for (int round = 0; round < 20; ++round) {
      const SignalHeader h{static_cast<uint16_t>(1 + rng() % 65535),
                           {static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng())},
                           {static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng())},
                           static_cast<uint32_t>(rng())};
      std::vector<uint32_t> data(words);
      for (uint32_t& w : data) w = static_cast<uint32_t>(rng());
      std::vector<std::byte> a(kMaxFrameBytes, std::byte{0xa5}), b(kMaxFrameBytes, std::byte{0x5a});
      const std::size_t n = pack_frame(a, h, data, {}, false);
      ASSERT_EQ(n, small_frame_bytes(words));
      ASSERT_EQ(pack_small_frame(b.data(), h, data), n);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n)) << words << " words";
      SignalView v;
      ASSERT_EQ(unpack_frame({b.data(), n}, v), FrameError::kNone);
      EXPECT_EQ(v.header.trace, h.trace);
      EXPECT_EQ(v.data_words, words);
    }
  }
}

TEST(FrameTest, DecodeValidatedAgreesWithUnpackAndClearsAReusedView) {
  // decode_validated reads the header as write_header's three words and
  // parses sections out of line: every field must match unpack_frame's, for
  // 0..3 sections, and a view reused from a frame with sections must not
  // keep them (Signal::section(i) does not check the count).
  const auto a = bytes_of("first");
  const auto b = bytes_of("second section");
  const auto c = bytes_of("3");
  const std::span<const std::byte> all[] = {a, b, c};
  SignalView reused;
  std::mt19937 rng(11);
  for (int round = 0; round < 4; ++round) {
    for (std::size_t count : {3u, 0u, 2u, 1u, 0u}) {
      const std::size_t words = rng() % (kMaxDataWords + 1);
      std::vector<uint32_t> data(words);
      for (auto& w : data) w = static_cast<uint32_t>(rng());
      const SignalHeader h{static_cast<uint16_t>(1 + rng() % 65535),
                           {static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng())},
                           {static_cast<uint16_t>(rng()), static_cast<uint16_t>(rng())},
                           static_cast<uint32_t>(rng())};
      std::vector<std::byte> buf(512);
      const bool checksum = round % 2 == 1;
      const std::size_t n = pack_frame(buf, h, data, {all, count}, checksum);
      ASSERT_NE(n, 0u);
      SignalView expect;
      ASSERT_EQ(unpack_frame({buf.data(), n}, expect), FrameError::kNone);
      ASSERT_EQ(decode_validated({buf.data(), n}, reused), n);
      EXPECT_EQ(reused.header.signal_number, h.signal_number);
      EXPECT_EQ(reused.header.receiver, h.receiver);
      EXPECT_EQ(reused.header.sender, h.sender);
      EXPECT_EQ(reused.header.trace, h.trace);
      ASSERT_EQ(reused.data_words, words);
      EXPECT_EQ(reused.data, expect.data);
      for (std::size_t i = 0; i < words; ++i) EXPECT_EQ(reused.word(i), data[i]);
      ASSERT_EQ(reused.section_count, count);
      for (std::size_t i = 0; i < kMaxSections; ++i) {
        EXPECT_EQ(reused.sections[i].data(), expect.sections[i].data()) << count << " sections, #" << i;
        EXPECT_EQ(reused.sections[i].size(), i < count ? all[i].size() : 0u) << count << " sections, #" << i;
      }
    }
  }
}

TEST(FrameTest, PackRefusesWhatDoesNotFitAndWritesNothing) {
  std::vector<std::byte> buf(64, std::byte{0x5A});
  const uint32_t data[26] = {};
  EXPECT_EQ(pack_frame(buf, {1, {}, {}, 0}, std::span(data, 26), {}, false), 0u);  // 26 words
  EXPECT_EQ(pack_frame(buf, {0, {}, {}, 0}, {}, {}, false), 0u);                   // signal 0
  std::vector<std::byte> big(kMaxFrameBytes);
  const std::span<const std::byte> s[] = {big};
  EXPECT_EQ(pack_frame(buf, {1, {}, {}, 0}, {}, s, false), 0u);                        // > 32 KB
  EXPECT_EQ(pack_frame(std::span(buf).first(23), {1, {}, {}, 0}, {}, {}, false), 0u);  // dest too small
  for (std::byte b : buf) EXPECT_EQ(b, std::byte{0x5A});
  std::vector<std::byte> exact(kHeaderBytes);
  EXPECT_EQ(pack_frame(exact, {1, {}, {}, 0}, {}, {}, false), kHeaderBytes);
}

TEST(FrameTest, LargestFrameIsAccepted) {
  const std::size_t payload = kMaxFrameBytes - kHeaderBytes - 4;
  std::vector<std::byte> section(payload, std::byte{7});
  const std::span<const std::byte> s[] = {section};
  std::vector<std::byte> buf(kMaxFrameBytes);
  ASSERT_EQ(pack_frame(buf, {9, {}, {}, 0}, {}, s, false), kMaxFrameBytes);
  SignalView v;
  EXPECT_EQ(unpack_frame(buf, v), FrameError::kNone);
}

class CorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const uint32_t data[] = {7, 8};
    const auto sec = bytes_of("abcde");
    const std::span<const std::byte> s[] = {sec};
    buf_.resize(128);
    n_ = pack_frame(buf_, {5, {1, 2}, {3, 4}, 0}, data, s, true);
    ASSERT_GT(n_, 0u);
    buf_.resize(n_);
  }
  FrameError check() {
    SignalView v;
    return unpack_frame(buf_, v);
  }
  std::vector<std::byte> buf_;
  std::size_t n_ = 0;
};

TEST_F(CorruptionTest, EachHeaderFieldIsChecked) {
  buf_[0] = std::byte{2};
  EXPECT_EQ(check(), FrameError::kBadVersion);
  SetUp();
  buf_[1] = std::byte{0x80};
  EXPECT_EQ(check(), FrameError::kBadFlags);
  SetUp();
  buf_[2] = buf_[3] = std::byte{0};
  EXPECT_EQ(check(), FrameError::kZeroSignalNumber);
  SetUp();
  buf_[4] = std::byte{static_cast<uint8_t>(n_ + 4)};
  EXPECT_EQ(check(), FrameError::kBadLength);  // not a multiple of 8
  SetUp();
  buf_[16] = std::byte{26};
  EXPECT_EQ(check(), FrameError::kTooManyDataWords);
  SetUp();
  buf_[17] = std::byte{4};
  EXPECT_EQ(check(), FrameError::kTooManySections);
  SetUp();
  buf_[19] = std::byte{1};
  EXPECT_EQ(check(), FrameError::kReservedNonZero);
}

TEST_F(CorruptionTest, BodyInconsistenciesAreChecked) {
  buf_[kHeaderBytes + 8] = std::byte{60};  // section length 5 -> 60
  EXPECT_EQ(check(), FrameError::kLengthMismatch);
  SetUp();
  buf_[kHeaderBytes + 12 + 5] = std::byte{1};  // padding after the section
  EXPECT_EQ(check(), FrameError::kBadPadding);
  SetUp();
  buf_[kHeaderBytes + 12] = std::byte{'X'};  // payload changed under the checksum
  EXPECT_EQ(check(), FrameError::kBadChecksum);
  SetUp();
  buf_[kHeaderBytes + 9] = std::byte{0xFF};  // huge section length must not overflow
  buf_[kHeaderBytes + 10] = std::byte{0xFF};
  buf_[kHeaderBytes + 11] = std::byte{0xFF};
  EXPECT_EQ(check(), FrameError::kLengthMismatch);
}

TEST(FrameTest, EveryPaddingByteIsChecked) {
  // Random frames (every section length modulo 4, every word-count parity,
  // with and without a checksum): each padding byte in turn set to a
  // non-zero value is kBadPadding, wherever it sits.
  std::mt19937 rng(23);
  uint32_t checked = 0;
  for (int round = 0; round < 300; ++round) {
    const bool checksum = rng() % 2 == 0;
    std::vector<uint32_t> data(rng() % (kMaxDataWords + 1));
    std::vector<std::vector<std::byte>> bodies(rng() % (kMaxSections + 1));
    for (auto& body : bodies) body.assign(rng() % 13, std::byte{0x11});
    const std::vector<std::span<const std::byte>> sections(bodies.begin(), bodies.end());
    std::vector<std::byte> buf(512);
    const std::size_t n = pack_frame(buf, {7, {1, 0}, {2, 0}, 0}, data, sections, checksum);
    ASSERT_GT(n, 0u);
    std::vector<std::size_t> pads;  // offsets of the padding bytes
    std::size_t at = kHeaderBytes + 4 * data.size() + 4 * bodies.size();
    for (const auto& body : bodies) {
      for (std::size_t i = body.size(); i % 4 != 0; ++i) pads.push_back(at + i);
      at += (body.size() + 3) / 4 * 4;
    }
    for (std::size_t i = at; i < n - (checksum ? 4 : 0); ++i) pads.push_back(i);
    for (std::size_t pad : pads) {
      buf[pad] = std::byte{0x80};
      SignalView v;
      EXPECT_EQ(unpack_frame({buf.data(), n}, v), FrameError::kBadPadding) << "round " << round << " byte " << pad;
      EXPECT_EQ(scan_frames({buf.data(), n}).error, FrameError::kBadPadding);
      buf[pad] = std::byte{0};
      ++checked;
    }
    SignalView v;
    ASSERT_EQ(unpack_frame({buf.data(), n}, v), FrameError::kNone);
  }
  EXPECT_GT(checked, 300u);
}

TEST_F(CorruptionTest, TruncationIsIncompleteNotAnError) {
  SignalView v;
  for (std::size_t cut = 0; cut < n_; ++cut)
    EXPECT_EQ(unpack_frame(std::span(buf_).first(cut), v), FrameError::kIncomplete) << cut;
}

TEST(FrameTest, ScanStopsAtTheFirstBadOrIncompleteFrame) {
  std::vector<std::byte> stream(1024);
  std::size_t at = 0;
  for (int i = 0; i < 5; ++i)
    at += pack_frame(std::span(stream).subspan(at), {static_cast<uint16_t>(i + 1), {}, {}, 0}, {}, {}, false);
  ScanResult r = scan_frames(std::span(stream).first(at));
  EXPECT_EQ(r.error, FrameError::kNone);
  EXPECT_EQ(r.frames, 5u);
  EXPECT_EQ(r.whole_bytes, at);
  r = scan_frames(std::span(stream).first(at - 1));
  EXPECT_EQ(r.error, FrameError::kIncomplete);
  EXPECT_EQ(r.frames, 4u);
  stream[3 * kHeaderBytes] = std::byte{0};  // corrupt the 4th frame's version
  r = scan_frames(std::span(stream).first(at));
  EXPECT_EQ(r.error, FrameError::kBadVersion);
  EXPECT_EQ(r.frames, 3u);
  EXPECT_EQ(r.error_offset, 3 * kHeaderBytes);
}

TEST(FrameTest, RandomFramesRoundTripThroughACursor) {
  std::mt19937_64 rng(12345);
  std::vector<std::byte> stream(1 << 20);
  std::size_t at = 0;
  std::vector<std::pair<uint16_t, std::size_t>> sent;
  while (true) {
    const auto words = static_cast<std::size_t>(rng() % (kMaxDataWords + 1));
    std::vector<uint32_t> data(words);
    for (auto& w : data) w = static_cast<uint32_t>(rng());
    std::vector<std::byte> sec(rng() % 3000);
    for (auto& b : sec) b = static_cast<std::byte>(rng());
    const std::span<const std::byte> s[] = {sec};
    const auto gsn = static_cast<uint16_t>(1 + rng() % 60000);
    const std::size_t n = pack_frame(std::span(stream).subspan(at), {gsn, {}, {}, 0}, data, s, rng() % 2 == 0);
    if (n == 0) break;
    at += n;
    sent.emplace_back(gsn, sec.size());
  }
  const ScanResult r = scan_frames(std::span(stream).first(at));
  ASSERT_EQ(r.error, FrameError::kNone);
  ASSERT_EQ(r.frames, sent.size());
  FrameCursor cursor(std::span<const std::byte>(stream).first(at));
  SignalView v;
  std::size_t i = 0;
  while (cursor.next(v)) {
    ASSERT_LT(i, sent.size());
    EXPECT_EQ(v.header.signal_number, sent[i].first);
    EXPECT_EQ(v.sections[0].size(), sent[i].second);
    ++i;
  }
  EXPECT_EQ(i, sent.size());
}

}  // namespace
}  // namespace fjord::frame
