// libFuzzer target: KeyCodec::decode on arbitrary bytes for a key of every
// column type (nullable and not). A key that decodes must re-encode to the
// same bytes (the encoding is canonical).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fjord/engine/key_codec.h"

using namespace fjord::engine;

namespace {
KeyCodec make_codec() {
  std::vector<KeyCodec::Column> columns = {
      {{"a", ColumnType::kInt32, 0, false}, 0},     {{"b", ColumnType::kUint64, 0, true}, 1},
      {{"c", ColumnType::kVarChar, 40, false}, 2},  {{"d", ColumnType::kBinary, 3, true}, 3},
      {{"e", ColumnType::kVarBinary, 10, true}, 4}, {{"f", ColumnType::kInt64, 0, false}, 5},
  };
  return KeyCodec("fuzz key", columns);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const KeyCodec codec = make_codec();
  std::vector<std::byte> key(size);
  if (size) std::memcpy(key.data(), data, size);
  std::vector<std::byte> scratch(size + 1);
  ValueRef values[6];
  auto n = codec.decode(key, scratch, values);
  if (!n) return 0;
  std::vector<std::byte> again(codec.max_encoded_bytes());
  auto m = codec.encode({values, *n}, again);
  if (!m) std::abort();  // decoded values must be encodable
  if (*m > key.size() || std::memcmp(again.data(), key.data(), *m) != 0) std::abort();
  return 0;
}
