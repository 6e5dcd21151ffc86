// libFuzzer target: every engine protocol decoder on arbitrary signals.
// Input: byte 0 picks the signal number, byte 1 the word count, then the
// words, then up to three sections split by the next three length bytes.
// Properties: no crash or over-read; every decoder that has an encoder
// gives back the words it decoded; whatever decodes, cursors over its
// sections walk to the end or stop with an error; a decoded TcKeyReq
// re-encodes to the same words; a train's records, as accepted, re-encode
// to a section of the same length, and a decoded KeyDataTrain's cursor yields exactly
// its count of records, each within the section.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fjord/engine/protocol.h"

using namespace fjord;
using namespace fjord::engine;
using namespace fjord::engine::protocol;

namespace {

const uint16_t kNumbers[] = {
    gsn::kTcKeyReq,
    gsn::kTcKeyConf,
    gsn::kTcKeyRef,
    gsn::kKeyData,
    gsn::kKeyDataConf,
    gsn::kLqhKeyReq,
    gsn::kLqhKeyConf,
    gsn::kLqhKeyRef,
    gsn::kLqhCommitReq,
    gsn::kLqhAbortConf,
    gsn::kScanReq,
    gsn::kScanFragReq,
    gsn::kScanFragNextReq,
    gsn::kScanFragConf,
    gsn::kScanFragRef,
    gsn::kScanRows,
    gsn::kScanConf,
    gsn::kScanRef,
    gsn::kScanNextReq,
    gsn::kSchemaRef,
    gsn::kCreateTableReq,
    gsn::kTcKeyTrain,
    gsn::kKeyDataTrain,
    // Appended, so that the corpus's first bytes keep naming what they did.
    gsn::kTcCommitReq,
    gsn::kTcRollbackReq,
    gsn::kTcRollbackConf,
    gsn::kTcAbortRep,
    gsn::kCreateTableConf,
    gsn::kDropTableReq,
    gsn::kDropTableConf,
    gsn::kGetTableReq,
    gsn::kGetTableConf,
    gsn::kSchemaInstall,
    gsn::kSchemaInstallConf,
    gsn::kApiRegReq,
    gsn::kApiRegConf,
    gsn::kLqhCommitConf,
    gsn::kLqhAbortReq,
    gsn::kScanCloseReq,
    gsn::kScanFragCloseReq,
};

// A decoded message re-encodes to the words it came from (and the number).
void same_words(const SignalOut& again, uint16_t number, const std::vector<uint32_t>& words) {
  if (again.number != number || again.word_count != words.size() ||
      std::memcmp(again.words, words.data(), 4 * words.size()) != 0)
    std::abort();
}

void walk_values(std::span<const std::byte> section) {
  ValueCursor c(section);
  ValueEntry e;
  while (c.next(e))
    if (e.bytes.size() > section.size()) std::abort();
}

void walk_filter(std::span<const std::byte> section) {
  FilterCursor c(section);
  Predicate p;
  while (c.next(p)) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const uint16_t number = kNumbers[data[0] % std::size(kNumbers)];
  const std::size_t words = data[1] % (frame::kMaxDataWords + 1);
  std::size_t at = 5;
  std::vector<uint32_t> word_values(words);
  for (auto& w : word_values) {
    if (at + 4 > size) return 0;
    std::memcpy(&w, data + at, 4);
    at += 4;
  }
  std::vector<std::vector<std::byte>> sections;
  for (int i = 0; i < 3 && data[2 + i] != 0; ++i) {
    const std::size_t n = std::min<std::size_t>(data[2 + i] * 8u, size - at);
    sections.emplace_back(reinterpret_cast<const std::byte*>(data + at),
                          reinterpret_cast<const std::byte*>(data + at + n));
    at += n;
  }
  std::vector<std::span<const std::byte>> spans(sections.begin(), sections.end());
  std::vector<std::byte> buffer(frame::kMaxFrameBytes);
  const std::size_t n = frame::pack_frame(buffer, {number, {2, 0}, {3, 0}, 0}, word_values, spans, false);
  if (n == 0) return 0;
  buffer.resize(n);  // exact size: ASan catches any read past the frame
  Signal s;
  s.sender_node = 7;
  frame::decode_validated(buffer, s.view);

  if (auto m = decode_tc_key_req(s)) {
    walk_values(m->key);
    walk_values(m->values);
    const SignalOut again = encode(*m);
    if (again.word_count != words || std::memcmp(again.words, word_values.data(), 4 * words) != 0) std::abort();
  }
  {
    TcKeyTrainCursor train(s);
    TcKeyReq r;
    std::vector<std::byte> again(frame::kMaxFrameBytes);
    std::size_t written = 0;
    uint32_t records = 0;
    while (train.next(r)) {
      walk_values(r.key);
      walk_values(r.values);
      const std::size_t wrote = put_tc_key_train_record(std::span(again).subspan(written), r);
      if (wrote == 0) std::abort();
      written += wrote;
      ++records;
    }
    // Accepted whole: its count of records, which re-encode to as many bytes
    // (padding bytes may differ: they are not read).
    if (train.error().is_ok() && (records != train.train().count || records == 0 || records > kMaxTrainOps ||
                                  written != train.train().records.size()))
      std::abort();
  }
  if (auto m = decode_key_data_train(s)) {
    KeyDataTrainCursor cursor(m->records);
    uint32_t op_index = 0, records = 0;
    std::span<const std::byte> values;
    while (cursor.next(op_index, values)) {
      if (values.data() < m->records.data() || values.data() + values.size() > m->records.data() + m->records.size())
        std::abort();
      walk_values(values);
      ++records;
    }
    if (records != m->count) std::abort();
    const SignalOut again = encode(*m);
    if (again.word_count != words || std::memcmp(again.words, word_values.data(), 4 * words) != 0) std::abort();
  }
  (void)decode_tc_key_conf(s);
  (void)decode_tc_key_ref(s);
  if (auto m = decode_key_data(s)) {
    walk_values(m->values);
    const SignalOut again = encode(*m);  // kKeyData or kKeyDataConf, as it came
    if (again.number != number || again.word_count != words ||
        std::memcmp(again.words, word_values.data(), 4 * words) != 0)
      std::abort();
  }
  if (auto m = decode_lqh_key_req(s)) walk_values(m->key);
  if (auto m = decode_lqh_key_conf(s)) walk_values(m->unique_after);
  (void)decode_lqh_key_ref(s);
  (void)decode_lqh_tx_req(s);
  (void)decode_lqh_tx_conf(s);
  if (auto m = decode_scan_req(s)) {
    if (auto b = decode_bounds(m->bounds)) {
      walk_values(b->lower);
      walk_values(b->upper);
    }
    walk_filter(m->filter);
  }
  if (auto m = decode_scan_frag_req(s)) walk_filter(m->filter);
  (void)decode_scan_frag_next(s);
  (void)decode_scan_frag_conf(s);
  (void)decode_scan_frag_ref(s);
  (void)decode_scan_rows(s);
  (void)decode_scan_conf(s);
  (void)decode_scan_ref(s);
  (void)decode_scan_next(s);
  (void)decode_schema_ref(s);
  if (auto m = decode_tc_tx_message(s)) same_words(encode(*m), number, word_values);
  if (auto m = decode_tc_abort_rep(s)) same_words(encode(*m), number, word_values);
  if (auto m = decode_schema_message(s)) {
    same_words(encode(*m), number, word_values);
    if (m->number == gsn::kCreateTableReq || m->number == gsn::kCreateTableConf || m->number == gsn::kGetTableConf)
      (void)decode_table(m->payload);
  }
  if (auto m = decode_schema_install(s)) {
    same_words(encode(*m), number, word_values);
    if (!m->drop) (void)decode_table(m->table);
  }
  if (auto m = decode_schema_install_conf(s)) same_words(encode(*m), number, word_values);
  if (auto m = decode_api_reg_req(s)) same_words(encode(*m), number, word_values);
  if (auto m = decode_api_reg_conf(s)) same_words(encode(*m), number, word_values);
  for (const auto& sec : sections) {
    (void)decode_table(sec);
    (void)decode_bounds(sec);
  }
  return 0;
}
