// Status and Result<T>: how expected failures travel.
//
// Expected conditions (a peer that went away, a full ring, EAGAIN, a bad
// config line, no RDMA device) are returned, never thrown. A Status carries a
// code for programs and a message for people; the message names what was
// wrong ("node 3 connected as type shm but link 1-3 is configured as tcp").
// Any thread; not for the per-signal hot path (messages allocate).
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "fjord/base/assert.h"

namespace fjord {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,    // caller passed something malformed (bad config, bad option)
  kNotFound,           // no such thing (unknown transporter, node, row)
  kAlreadyExists,      // duplicate (link configured twice, duplicate key)
  kUnavailable,        // hardware or service missing (no RDMA device)
  kRejected,           // peer refused us, or we refused a peer (handshake)
  kLinkDown,           // the link is down; no more data will move on it
  kProtocolError,      // peer sent bytes that break the wire format
  kTimeout,            // a deadline passed
  kResourceExhausted,  // a bounded pool is full (send buffer, DataMemory)
  kIoError,            // an OS call failed unexpectedly
  kInternal,           // a bug that we caught without crashing
};

const char* status_code_name(StatusCode code) noexcept;

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {
    FJORD_ASSERT(code != StatusCode::kOk);
  }
  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", or "ok".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// errno-flavoured helper: "<what>: <strerror(err)>".
Status io_error(const std::string& what, int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : value_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    FJORD_ASSERT(!std::get<Status>(value_).is_ok());
  }

  bool is_ok() const { return std::holds_alternative<T>(value_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<Status>(value_);
  }
  T& value() & {
    FJORD_ASSERT(is_ok());
    return std::get<T>(value_);
  }
  const T& value() const& {
    FJORD_ASSERT(is_ok());
    return std::get<T>(value_);
  }
  T&& value() && {
    FJORD_ASSERT(is_ok());
    return std::get<T>(std::move(value_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace fjord
