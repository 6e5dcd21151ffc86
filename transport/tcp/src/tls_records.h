// The TLS 1.3 record layer of a TCP link's data path (internal header):
// application data sealed into records and opened again (RFC 8446 §5),
// with the traffic keys the handshake agreed (TlsSession derives them).
//
// OpenSSL runs the handshake; after it, the link's bytes go through these
// two classes instead of SSL_read/SSL_write. Same records on the wire, and
// the AEAD is OpenSSL's EVP cipher (AES-GCM with AES-NI where the CPU has
// it); what is left out is OpenSSL's per-record bookkeeping around it, and
// a copy through a memory BIO on the receive side:
//   - send: every record of one write() is sealed into one buffer and
//     leaves in one send() (MSG_NOSIGNAL: a reset peer is an error, never
//     SIGPIPE);
//   - receive: one recv() takes whatever ciphertext the socket has; each
//     whole record is decrypted straight into the caller's span when it fits
//     there, in place in the buffer when it does not.
// A Fjord link carries application data only after the handshake: no key
// update, no session tickets (the context disables them). An alert, any
// other record type, an oversized record or a failed tag is an error that
// names it; the keys last as long as the connection.
//
// Threads: TlsRecordSender belongs to the link's sender thread,
// TlsRecordReceiver to its receiver thread; they share nothing, so a link
// needs no lock. Hot path: write(), read(), holds_data(); no allocation
// after start().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "fjord/base/status.h"

struct evp_cipher_ctx_st;

namespace fjord::tcp {

enum class TlsIoState : uint8_t {
  kOk,          // `bytes` moved
  kWouldBlock,  // the socket has nothing to read, or no room to write
  kClosed,      // the peer closed the connection
  kFailed,      // a TLS alert, a bad record or a socket error: the error string says which
};
struct TlsIo {
  std::size_t bytes = 0;
  TlsIoState state = TlsIoState::kOk;
};

// The TLS 1.3 cipher suites a Fjord link may agree (its IANA number).
enum class TlsSuite : uint16_t {
  kAes128GcmSha256 = 0x1301,
  kAes256GcmSha384 = 0x1302,
  kChacha20Poly1305Sha256 = 0x1303,
};

// One direction's record protection: the AEAD key and the static IV,
// derived from that direction's application traffic secret
// (HKDF-Expand-Label "key" and "iv", RFC 8446 §7.3). Wiped when destroyed.
struct TlsTrafficKeys {
  TlsSuite suite = TlsSuite::kAes128GcmSha256;
  std::array<uint8_t, 32> key{};
  std::size_t key_bytes = 0;
  std::array<uint8_t, 12> iv{};

  TlsTrafficKeys() = default;
  TlsTrafficKeys(const TlsTrafficKeys&) = default;
  TlsTrafficKeys& operator=(const TlsTrafficKeys&) = default;
  ~TlsTrafficKeys();
};

// OpenSSL's error queue of this thread, oldest first, as one line; emptied.
std::string openssl_errors();

// Derives one direction's keys from its traffic secret, whose length is
// the suite's hash size (32 or 48 bytes).
Result<TlsTrafficKeys> derive_traffic_keys(TlsSuite suite, std::span<const uint8_t> secret);

// Wire sizes (RFC 8446 §5.1, §5.2).
inline constexpr std::size_t kTlsRecordHeaderBytes = 5;
inline constexpr std::size_t kTlsTagBytes = 16;
inline constexpr std::size_t kTlsMaxPlaintextBytes = 16 * 1024;
inline constexpr std::size_t kTlsMaxCiphertextBytes = kTlsMaxPlaintextBytes + 256;
// The most one record of ours takes on the wire: header, data, inner type, tag.
inline constexpr std::size_t kTlsMaxSealedRecordBytes =
    kTlsRecordHeaderBytes + kTlsMaxPlaintextBytes + 1 + kTlsTagBytes;

// The AEAD state of one direction: key, static IV and record sequence number.
class TlsRecordCipher {
 public:
  TlsRecordCipher();
  ~TlsRecordCipher();
  TlsRecordCipher(const TlsRecordCipher&) = delete;
  TlsRecordCipher& operator=(const TlsRecordCipher&) = delete;

  Status start(const TlsTrafficKeys& keys, bool encrypt);
  bool started() const { return ctx_ != nullptr; }
  // Seals `content` with inner content type `type` into `out` (which holds
  // content.size() + 22 bytes: header, inner type, tag); returns its size.
  // `content` may not overlap `out`.
  Result<std::size_t> seal(uint8_t type, std::span<const std::byte> content, std::span<std::byte> out);
  // Opens the record whose 5-byte header is `header` and whose body is
  // `body` (ciphertext then tag) into `out` (body.size() - 16 bytes; may be
  // body itself). False if the tag does not match.
  bool open(std::span<const std::byte> header, std::span<std::byte> body, std::byte* out);

 private:
  void next_nonce(uint8_t* nonce) const;

  evp_cipher_ctx_st* ctx_ = nullptr;
  std::array<uint8_t, 12> iv_{};
  uint64_t sequence_ = 0;
};

class TlsRecordSender {
 public:
  // Buffer for the records of one write(): several whole records, so a
  // large flush leaves in few send() calls.
  static constexpr std::size_t kBufferBytes = 4 * kTlsMaxSealedRecordBytes;

  TlsRecordSender();
  Status start(const TlsTrafficKeys& keys) { return cipher_.start(keys, true); }

  // Seals a prefix of `bytes` into records and sends them on `fd`: kOk with
  // the plaintext bytes whose records all went out. If the socket took only
  // part, kWouldBlock; the records wait here and the next write() sends
  // them first, and must pass the same bytes again (at least as many).
  TlsIo write(int fd, std::span<const std::byte> bytes);
  // Seals an alert record (level, description) and sends it if the socket
  // takes it now; for tests of a peer's alert.
  TlsIo write_alert(int fd, uint8_t level, uint8_t description);
  // Why the last write() said kFailed.
  const std::string& error() const { return error_; }

 private:
  TlsIo send_sealed(int fd);

  TlsRecordCipher cipher_;
  std::unique_ptr<std::byte[]> buffer_;
  std::size_t unsent_begin_ = 0;  // [unsent_begin_, unsent_end_): sealed, not yet sent
  std::size_t unsent_end_ = 0;
  std::size_t sealed_plaintext_ = 0;  // plaintext bytes in the sealed records
  std::string error_;
};

class TlsRecordReceiver {
 public:
  // Room for several records, so one recv() takes what a burst brought.
  static constexpr std::size_t kBufferBytes = 4 * (kTlsRecordHeaderBytes + kTlsMaxCiphertextBytes);

  TlsRecordReceiver();
  // `already_read`: bytes the handshake took from the socket beyond its own
  // records; they come first.
  Status start(const TlsTrafficKeys& keys, std::span<const std::byte> already_read);

  // Application data into `into`: what the buffer's whole records hold,
  // after one recv() on `fd` if it held none. kWouldBlock: nothing yet.
  TlsIo read(int fd, std::span<std::byte> into);
  // True if data waits here (a whole record, or the rest of one that did
  // not fit), where the socket does not show it. After a read() that
  // returned this false, anything more comes through the socket.
  bool holds_data() const { return holds_data_; }
  // Why the last read() said kFailed or kClosed.
  const std::string& error() const { return error_; }

 private:
  enum class Opened : uint8_t { kData, kClosed, kFailed };
  std::size_t deliver_plaintext(std::span<std::byte> into);
  TlsIoState take_socket_bytes(int fd);
  std::size_t whole_record_bytes() const;
  Opened open_front(std::span<std::byte> into, std::size_t* delivered);
  Opened content_of(uint8_t type, std::span<const std::byte> content);
  Opened fail(std::string why);

  TlsRecordCipher cipher_;
  std::unique_ptr<std::byte[]> buffer_;
  std::size_t begin_ = 0;  // [begin_, end_): ciphertext not yet opened
  std::size_t end_ = 0;
  std::size_t plain_begin_ = 0;  // [plain_begin_, plain_end_): opened in place, not yet delivered
  std::size_t plain_end_ = 0;
  bool holds_data_ = false;
  TlsIoState ended_ = TlsIoState::kOk;  // kClosed or kFailed once the stream has ended
  std::string error_;
};

}  // namespace fjord::tcp
