// TLS 1.3 records of the data path: key derivation, seal/open with
// OpenSSL's EVP AEAD, and the socket I/O around them.
#include "tls_records.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fjord/base/assert.h"

namespace fjord::tcp {
namespace {

constexpr uint8_t kContentAlert = 21;
constexpr uint8_t kContentHandshake = 22;
constexpr uint8_t kContentApplicationData = 23;
constexpr uint8_t kAlertCloseNotify = 0;

struct SuiteParams {
  const char* cipher;
  const char* digest;
  std::size_t key_bytes;
  std::size_t secret_bytes;
};

SuiteParams suite_params(TlsSuite suite) {
  switch (suite) {
    case TlsSuite::kAes128GcmSha256: return {"AES-128-GCM", "SHA256", 16, 32};
    case TlsSuite::kAes256GcmSha384: return {"AES-256-GCM", "SHA384", 32, 48};
    case TlsSuite::kChacha20Poly1305Sha256: return {"ChaCha20-Poly1305", "SHA256", 32, 32};
  }
  FJORD_ASSERT_MSG(false, "a TLS suite without parameters");
  return {};
}

// HKDF-Expand-Label(secret, label, "", out.size()) of RFC 8446 §7.1.
Status expand_label(const char* digest, std::span<const uint8_t> secret, const std::string& label,
                    std::span<uint8_t> out) {
  const std::string full = "tls13 " + label;
  std::array<uint8_t, 64> info{};
  std::size_t n = 0;
  info[n++] = static_cast<uint8_t>(out.size() >> 8);
  info[n++] = static_cast<uint8_t>(out.size());
  info[n++] = static_cast<uint8_t>(full.size());
  std::memcpy(info.data() + n, full.data(), full.size());
  n += full.size();
  info[n++] = 0;  // empty context
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* ctx = kdf ? EVP_KDF_CTX_new(kdf) : nullptr;
  EVP_KDF_free(kdf);
  if (ctx == nullptr) return Status(StatusCode::kInternal, "HKDF: " + openssl_errors());
  int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(digest), 0),
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(secret.data()), secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.data(), n), OSSL_PARAM_construct_end()};
  const int rc = EVP_KDF_derive(ctx, out.data(), out.size(), params);
  EVP_KDF_CTX_free(ctx);
  if (rc != 1) return Status(StatusCode::kInternal, "HKDF-Expand-Label " + label + ": " + openssl_errors());
  return Status::ok();
}

std::string alert_name(uint8_t description) {
  return std::string(SSL_alert_desc_string_long(description)) + " (" + std::to_string(description) + ")";
}

}  // namespace

// OpenSSL's error queue of this thread oldest first, as one line; emptied.
std::string openssl_errors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(code);
    if (!text.empty()) text += "; ";
    text += reason ? reason : "error " + std::to_string(code);
  }
  return text.empty() ? std::string("no detail from OpenSSL") : text;
}

TlsTrafficKeys::~TlsTrafficKeys() {
  OPENSSL_cleanse(key.data(), key.size());
  OPENSSL_cleanse(iv.data(), iv.size());
}

Result<TlsTrafficKeys> derive_traffic_keys(TlsSuite suite, std::span<const uint8_t> secret) {
  const SuiteParams params = suite_params(suite);
  if (secret.size() != params.secret_bytes)
    return Status(StatusCode::kInternal, "a TLS traffic secret of " + std::to_string(secret.size()) +
                                             " bytes where the suite's hash gives " +
                                             std::to_string(params.secret_bytes));
  TlsTrafficKeys keys;
  keys.suite = suite;
  keys.key_bytes = params.key_bytes;
  if (Status s = expand_label(params.digest, secret, "key", {keys.key.data(), keys.key_bytes}); !s) return s;
  if (Status s = expand_label(params.digest, secret, "iv", keys.iv); !s) return s;
  return keys;
}

// ---- TlsRecordCipher --------------------------------------------------------

TlsRecordCipher::TlsRecordCipher() = default;

TlsRecordCipher::~TlsRecordCipher() { EVP_CIPHER_CTX_free(ctx_); }

Status TlsRecordCipher::start(const TlsTrafficKeys& keys, bool encrypt) {
  FJORD_ASSERT(ctx_ == nullptr);
  const SuiteParams params = suite_params(keys.suite);
  FJORD_ASSERT(keys.key_bytes == params.key_bytes);
  ERR_clear_error();
  EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, params.cipher, nullptr);
  if (cipher == nullptr) return Status(StatusCode::kInternal, std::string(params.cipher) + ": " + openssl_errors());
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const int rc = ctx ? EVP_CipherInit_ex2(ctx, cipher, keys.key.data(), keys.iv.data(), encrypt ? 1 : 0, nullptr) : 0;
  EVP_CIPHER_free(cipher);  // the context holds its own reference
  if (rc != 1) {
    EVP_CIPHER_CTX_free(ctx);
    return Status(StatusCode::kInternal, std::string(params.cipher) + " key set-up: " + openssl_errors());
  }
  ctx_ = ctx;
  iv_ = keys.iv;
  sequence_ = 0;
  return Status::ok();
}

// The per-record nonce: the static IV XOR the sequence number, big-endian
// in its last 8 bytes (RFC 8446 §5.3).
void TlsRecordCipher::next_nonce(uint8_t* nonce) const {
  std::memcpy(nonce, iv_.data(), iv_.size());
  for (int i = 0; i < 8; ++i) nonce[11 - i] ^= static_cast<uint8_t>(sequence_ >> (8 * i));
}

Result<std::size_t> TlsRecordCipher::seal(uint8_t type, std::span<const std::byte> content, std::span<std::byte> out) {
  FJORD_ASSERT(ctx_ != nullptr);
  FJORD_ASSERT(content.size() <= kTlsMaxPlaintextBytes);
  const std::size_t body = content.size() + 1 + kTlsTagBytes;
  FJORD_ASSERT(out.size() >= kTlsRecordHeaderBytes + body);
  auto* header = reinterpret_cast<uint8_t*>(out.data());
  header[0] = kContentApplicationData;  // the outer type of every protected record
  header[1] = 3;
  header[2] = 3;
  header[3] = static_cast<uint8_t>(body >> 8);
  header[4] = static_cast<uint8_t>(body);
  // The inner plaintext (content, then its type) is assembled in place and
  // encrypted there: one cipher update per record.
  uint8_t* inner = header + kTlsRecordHeaderBytes;
  if (!content.empty()) std::memcpy(inner, content.data(), content.size());
  inner[content.size()] = type;
  const int inner_bytes = static_cast<int>(content.size() + 1);
  uint8_t nonce[12];
  next_nonce(nonce);
  int n = 0;
  if (EVP_EncryptInit_ex2(ctx_, nullptr, nullptr, nonce, nullptr) != 1 ||
      EVP_EncryptUpdate(ctx_, nullptr, &n, header, kTlsRecordHeaderBytes) != 1 ||
      EVP_EncryptUpdate(ctx_, inner, &n, inner, inner_bytes) != 1 ||
      EVP_EncryptFinal_ex(ctx_, inner + inner_bytes, &n) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_GET_TAG, kTlsTagBytes, inner + inner_bytes) != 1)
    return Status(StatusCode::kInternal, "TLS record encryption failed: " + openssl_errors());
  ++sequence_;
  return kTlsRecordHeaderBytes + body;
}

bool TlsRecordCipher::open(std::span<const std::byte> header, std::span<std::byte> body, std::byte* out) {
  FJORD_ASSERT(ctx_ != nullptr);
  FJORD_ASSERT(header.size() == kTlsRecordHeaderBytes);
  FJORD_ASSERT(body.size() > kTlsTagBytes);
  const int cipher_bytes = static_cast<int>(body.size() - kTlsTagBytes);
  auto* in = reinterpret_cast<uint8_t*>(body.data());
  auto* plain = reinterpret_cast<uint8_t*>(out);
  uint8_t nonce[12];
  next_nonce(nonce);
  int n = 0;
  int final_bytes = 0;
  const bool ok = EVP_DecryptInit_ex2(ctx_, nullptr, nullptr, nonce, nullptr) == 1 &&
                  EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_SET_TAG, kTlsTagBytes, in + cipher_bytes) == 1 &&
                  EVP_DecryptUpdate(ctx_, nullptr, &n, reinterpret_cast<const uint8_t*>(header.data()),
                                    kTlsRecordHeaderBytes) == 1 &&
                  EVP_DecryptUpdate(ctx_, plain, &n, in, cipher_bytes) == 1 &&
                  EVP_DecryptFinal_ex(ctx_, plain + n, &final_bytes) == 1;
  if (!ok) {
    ERR_clear_error();
    return false;
  }
  ++sequence_;
  return true;
}

// ---- TlsRecordSender --------------------------------------------------------

TlsRecordSender::TlsRecordSender() : buffer_(std::make_unique<std::byte[]>(kBufferBytes)) {}

TlsIo TlsRecordSender::write(int fd, std::span<const std::byte> bytes) {
  FJORD_ASSERT(!bytes.empty());
  FJORD_ASSERT(cipher_.started());
  if (unsent_end_ == 0) {
    // Nothing sealed and unsent: seal as much of `bytes` as the buffer holds.
    std::size_t taken = 0;
    std::size_t sealed = 0;
    while (taken < bytes.size() && kBufferBytes - sealed >= kTlsMaxSealedRecordBytes) {
      const std::size_t chunk = std::min(bytes.size() - taken, kTlsMaxPlaintextBytes);
      auto n = cipher_.seal(kContentApplicationData, bytes.subspan(taken, chunk),
                            {buffer_.get() + sealed, kBufferBytes - sealed});
      if (!n) {
        error_ = n.status().message();
        return {0, TlsIoState::kFailed};
      }
      sealed += *n;
      taken += chunk;
    }
    unsent_begin_ = 0;
    unsent_end_ = sealed;
    sealed_plaintext_ = taken;
  } else {
    FJORD_ASSERT_MSG(bytes.size() >= sealed_plaintext_, "a retried TLS write passes fewer bytes than it sealed");
  }
  return send_sealed(fd);
}

TlsIo TlsRecordSender::write_alert(int fd, uint8_t level, uint8_t description) {
  FJORD_ASSERT(unsent_end_ == 0);
  const std::byte alert[2] = {std::byte{level}, std::byte{description}};
  auto n = cipher_.seal(kContentAlert, alert, {buffer_.get(), kBufferBytes});
  if (!n) {
    error_ = n.status().message();
    return {0, TlsIoState::kFailed};
  }
  unsent_begin_ = 0;
  unsent_end_ = *n;
  sealed_plaintext_ = 0;
  return send_sealed(fd);
}

TlsIo TlsRecordSender::send_sealed(int fd) {
  FJORD_ASSERT(unsent_begin_ < unsent_end_);
  while (unsent_begin_ < unsent_end_) {
    const ssize_t n =
        ::send(fd, buffer_.get() + unsent_begin_, unsent_end_ - unsent_begin_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      unsent_begin_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return {0, TlsIoState::kWouldBlock};
    error_ = std::string("send failed: ") + (n < 0 ? std::strerror(errno) : "the socket took nothing");
    return {0, TlsIoState::kFailed};
  }
  const std::size_t sent = sealed_plaintext_;
  unsent_begin_ = unsent_end_ = sealed_plaintext_ = 0;
  return {sent, TlsIoState::kOk};
}

// ---- TlsRecordReceiver ------------------------------------------------------

TlsRecordReceiver::TlsRecordReceiver() : buffer_(std::make_unique<std::byte[]>(kBufferBytes)) {}

Status TlsRecordReceiver::start(const TlsTrafficKeys& keys, std::span<const std::byte> already_read) {
  FJORD_ASSERT(end_ == 0);
  if (already_read.size() > kBufferBytes)
    return Status(StatusCode::kProtocolError, "the peer sent " + std::to_string(already_read.size()) +
                                                  " bytes right after the TLS handshake, more than a link buffers");
  if (Status s = cipher_.start(keys, false); !s) return s;
  if (!already_read.empty()) std::memcpy(buffer_.get(), already_read.data(), already_read.size());
  end_ = already_read.size();
  holds_data_ = whole_record_bytes() > 0;
  return Status::ok();
}

// The size of the whole record at begin_ (header included), or 0 if the
// buffer holds less than one. A header that no valid record has counts as
// whole, so that open_front() refuses it.
std::size_t TlsRecordReceiver::whole_record_bytes() const {
  const std::size_t held = end_ - begin_;
  if (held < kTlsRecordHeaderBytes) return 0;
  const auto* header = reinterpret_cast<const uint8_t*>(buffer_.get() + begin_);
  const std::size_t body = (static_cast<std::size_t>(header[3]) << 8) | header[4];
  if (header[0] != kContentApplicationData || body > kTlsMaxCiphertextBytes) return kTlsRecordHeaderBytes;
  return held >= kTlsRecordHeaderBytes + body ? kTlsRecordHeaderBytes + body : 0;
}

// One recv() into the buffer's free tail, after moving a partial record to
// the buffer's start when the tail could not hold the rest of it.
TlsIoState TlsRecordReceiver::take_socket_bytes(int fd) {
  FJORD_ASSERT(plain_begin_ == plain_end_);
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (kBufferBytes - begin_ < kTlsRecordHeaderBytes + kTlsMaxCiphertextBytes) {
    std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  for (;;) {
    const ssize_t n = ::recv(fd, buffer_.get() + end_, kBufferBytes - end_, MSG_DONTWAIT);
    if (n > 0) {
      end_ += static_cast<std::size_t>(n);
      return TlsIoState::kOk;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return TlsIoState::kWouldBlock;
    if (n < 0) {
      error_ = std::string("receive failed: ") + std::strerror(errno);
      return TlsIoState::kFailed;
    }
    error_ = begin_ == end_ ? std::string("the peer closed the connection")
                            : "the peer closed the connection in the middle of a TLS record (" +
                                  std::to_string(end_ - begin_) + " bytes of it received)";
    return TlsIoState::kClosed;
  }
}

std::size_t TlsRecordReceiver::deliver_plaintext(std::span<std::byte> into) {
  const std::size_t n = std::min(into.size(), plain_end_ - plain_begin_);
  std::memcpy(into.data(), buffer_.get() + plain_begin_, n);
  plain_begin_ += n;
  if (plain_begin_ == plain_end_) plain_begin_ = plain_end_ = 0;
  return n;
}

TlsIo TlsRecordReceiver::read(int fd, std::span<std::byte> into) {
  FJORD_ASSERT(!into.empty());
  FJORD_ASSERT(cipher_.started());
  if (ended_ != TlsIoState::kOk) return {0, ended_};
  std::size_t done = 0;
  if (plain_begin_ != plain_end_) {
    done = deliver_plaintext(into);
  } else if (whole_record_bytes() == 0) {
    const TlsIoState taken = take_socket_bytes(fd);
    if (taken != TlsIoState::kOk) {
      holds_data_ = false;
      if (taken != TlsIoState::kWouldBlock) ended_ = taken;
      return {0, taken};
    }
  }
  while (done < into.size() && plain_begin_ == plain_end_ && whole_record_bytes() > 0) {
    const Opened opened = open_front(into.subspan(done), &done);
    if (opened != Opened::kData) {
      ended_ = opened == Opened::kClosed ? TlsIoState::kClosed : TlsIoState::kFailed;
      // Data opened before the end is delivered first; the next read() says it ended.
      holds_data_ = done > 0;
      return {done, done > 0 ? TlsIoState::kOk : ended_};
    }
  }
  holds_data_ = plain_begin_ != plain_end_ || whole_record_bytes() > 0;
  return {done, done > 0 ? TlsIoState::kOk : TlsIoState::kWouldBlock};
}

// Opens the whole record at begin_: its application data goes to `into`
// (straight, when it has room for the whole record; else in place, the
// rest kept for the next read()), adding to *delivered.
TlsRecordReceiver::Opened TlsRecordReceiver::open_front(std::span<std::byte> into, std::size_t* delivered) {
  const std::size_t record = whole_record_bytes();
  FJORD_ASSERT(record >= kTlsRecordHeaderBytes);
  std::byte* header = buffer_.get() + begin_;
  const auto type = static_cast<uint8_t>(header[0]);
  const std::size_t body = record - kTlsRecordHeaderBytes;
  if (type != kContentApplicationData)
    return fail("a TLS record of type " + std::to_string(type) +
                " after the handshake, where only protected records (type 23) belong");
  const std::size_t announced = (static_cast<std::size_t>(header[3]) << 8) | static_cast<uint8_t>(header[4]);
  if (announced > kTlsMaxCiphertextBytes)
    return fail("a TLS record of " + std::to_string(announced) + " bytes, above the limit of " +
                std::to_string(kTlsMaxCiphertextBytes) + " (record overflow)");
  if (body <= kTlsTagBytes) return fail("a TLS record of " + std::to_string(body) + " bytes, too short for its tag");
  const std::size_t inner_bytes = body - kTlsTagBytes;
  const bool straight = into.size() >= inner_bytes;
  std::byte* plain = straight ? into.data() : header + kTlsRecordHeaderBytes;
  if (!cipher_.open({header, kTlsRecordHeaderBytes}, {header + kTlsRecordHeaderBytes, body}, plain))
    return fail(
        "a TLS record failed authentication (bad record MAC): altered on the way or not sealed with the "
        "link's key");
  begin_ += record;
  // The inner type is the last non-zero byte; zeros after it are padding.
  std::size_t end = inner_bytes;
  while (end > 0 && plain[end - 1] == std::byte{0}) --end;
  if (end == 0) return fail("a TLS record without a content type (all padding)");
  const auto inner_type = static_cast<uint8_t>(plain[end - 1]);
  const std::span<const std::byte> content(plain, end - 1);
  if (inner_type != kContentApplicationData) return content_of(inner_type, content);
  if (straight) {
    *delivered += content.size();
  } else {
    plain_begin_ = static_cast<std::size_t>(plain - buffer_.get());
    plain_end_ = plain_begin_ + content.size();
    if (!content.empty()) *delivered += deliver_plaintext(into);
  }
  return Opened::kData;
}

// A record that is not application data: an alert or a handshake message.
TlsRecordReceiver::Opened TlsRecordReceiver::content_of(uint8_t type, std::span<const std::byte> content) {
  if (type == kContentAlert) {
    if (content.size() != 2) return fail("a TLS alert of " + std::to_string(content.size()) + " bytes (2 expected)");
    const auto description = static_cast<uint8_t>(content[1]);
    if (description == kAlertCloseNotify) {
      error_ = "the peer closed the connection (TLS close_notify)";
      return Opened::kClosed;
    }
    return fail("the peer sent TLS alert " + alert_name(description));
  }
  if (type == kContentHandshake)
    return fail(
        "a TLS handshake message after the handshake (a key update or a ticket), which a Fjord link "
        "does not take");
  return fail("a TLS record with inner content type " + std::to_string(type));
}

TlsRecordReceiver::Opened TlsRecordReceiver::fail(std::string why) {
  error_ = std::move(why);
  return Opened::kFailed;
}

}  // namespace fjord::tcp
