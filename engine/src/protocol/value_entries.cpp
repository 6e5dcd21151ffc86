// Value entries: what ValueCursor found wrong, in words.
#include "fjord/engine/protocol/value_entries.h"

#include <string>

namespace fjord::engine::protocol {

Status ValueCursor::error() const {
  const std::string column = std::to_string(column_);
  switch (problem_) {
    case Problem::kNone: return Status::ok();
    case Problem::kShortHeader: return Status(StatusCode::kProtocolError, "value entry shorter than its 8-byte header");
    case Problem::kBadFlags:
      return Status(StatusCode::kProtocolError,
                    "value entry for column " + column + " has flags " + std::to_string(flags_));
    case Problem::kNullWithLength:
      return Status(StatusCode::kProtocolError, "NULL value with length for column " + column);
    case Problem::kPastTheEnd:
      return Status(StatusCode::kProtocolError, "value for column " + column + " claims " + std::to_string(length_) +
                                                    " bytes, past the end of its section");
  }
  return Status(StatusCode::kInternal, "unknown value cursor problem");
}

}  // namespace fjord::engine::protocol
