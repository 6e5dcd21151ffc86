// Where each field of each engine signal sits: its data words and its
// sections, named once. The encoders, the decoders and the route peeks in
// protocol.cpp all index by these names, so a layout changes in one place.
//
// One struct per layout: `enum Word` lists the data words in wire order,
// kWordCount last (the signal has exactly that many); `enum Section` lists
// the sections, kSectionCount last (a signal may carry fewer: trailing
// empty sections are not sent). A transaction id takes two words, kTxHi
// then kTxLo. A layout that several signal numbers share says which.
//
// Constants only; any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fjord::engine::protocol::layout {

// ---- key operations ------------------------------------------------------------

struct TcKeyReq {  // API -> TC
  enum Word : uint8_t {
    kApiConn,
    kTxHi,
    kTxLo,
    kTableId,
    kTableVersion,
    kOpBits,  // OpType in bits 0-7, LockMode in bits 8-15, the rest zero
    kFlags,
    kOpIndex,
    kIndexId,
    kBatchOps,
    kWordCount
  };
  enum Section : uint8_t { kKey, kValues, kColumns, kSectionCount };
};

struct TcKeyConf {  // TC -> API
  enum Word : uint8_t { kApiConn, kTxHi, kTxLo, kOps, kDataMessages, kCommitted, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

struct TcKeyRef {  // TC -> API
  enum Word : uint8_t { kApiConn, kTxHi, kTxLo, kOpIndex, kError, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

struct KeyData {  // LDM -> API (kKeyData)
  enum Word : uint8_t { kApiConn, kTxHi, kTxLo, kOpIndex, kWordCount };
  enum Section : uint8_t { kValues, kSectionCount };
};

// kKeyDataConf: a KeyData's words, then the batch's count of operations and
// of data messages.
struct KeyDataConf {
  enum Word : uint8_t { kApiConn, kTxHi, kTxLo, kOpIndex, kBatchOps, kDataMessages, kWordCount };
  enum Section : uint8_t { kValues, kSectionCount };
};
static_assert(int{KeyDataConf::kOpIndex} == int{KeyData::kOpIndex}, "a KeyDataConf begins with a KeyData's words");
static_assert(int{KeyDataConf::kBatchOps} == int{KeyData::kWordCount}, "... and adds its own after them");
static_assert(int{KeyDataConf::kValues} == int{KeyData::kValues}, "... and has its section");

// kTcCommitReq, kTcRollbackReq, kTcRollbackConf.
struct TcTxMessage {
  enum Word : uint8_t { kApiConn, kTxHi, kTxLo, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

struct TcAbortRep {  // TC -> API
  enum Word : uint8_t { kApiConn, kTxHi, kTxLo, kError, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

// ---- trains ----------------------------------------------------------------------

struct TcKeyTrain {  // API -> TC
  enum Word : uint8_t { kApiConn, kTxHi, kTxLo, kCount, kWordCount };
  enum Section : uint8_t { kRecords, kSectionCount };
};

// One record of a TcKeyTrain's section: these 32-bit words, then the key,
// the values and the column list, each padded to 4 bytes.
struct TcKeyTrainRecord {
  enum Word : uint8_t {
    kTableId,
    kTableVersion,
    kOpBits,  // as TcKeyReq::kOpBits
    kFlags,
    kOpIndex,
    kIndexId,
    kBatchOps,
    kKeyBytes,
    kValueBytes,
    kColumnBytes,
    kWordCount
  };
};

struct KeyDataTrain {  // TC -> API
  enum Word : uint8_t { kApiConn, kTxHi, kTxLo, kCount, kEndsBatch, kBatchOps, kDataMessages, kWordCount };
  enum Section : uint8_t { kRecords, kSectionCount };
};

// One record of a KeyDataTrain's section: these 32-bit words, then
// kValueBytes bytes of value entries.
struct KeyDataTrainRecord {
  enum Word : uint8_t { kOpIndex, kValueBytes, kWordCount };
};

// ---- TC <-> LDM -----------------------------------------------------------------

struct LqhKeyReq {  // TC -> LDM
  enum Word : uint8_t {
    kTcOp,
    kTxHi,
    kTxLo,
    kTableId,
    kTableVersion,
    kOpBits,  // as TcKeyReq::kOpBits
    kResultTo,
    kPartition,
    kApiNode,
    kApiConn,
    kOpIndex,
    kKeyHash,
    kWordCount
  };
  enum Section : uint8_t { kKey, kValues, kColumns, kSectionCount };
};

struct LqhKeyConf {  // LDM -> TC
  enum Word : uint8_t { kTcOp, kTxHi, kTxLo, kDataSentToApi, kWordCount };
  enum Section : uint8_t { kData, kUniqueBefore, kUniqueAfter, kSectionCount };
};

struct LqhKeyRef {  // LDM -> TC
  enum Word : uint8_t { kTcOp, kTxHi, kTxLo, kError, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

// kLqhCommitReq, kLqhAbortReq (TC -> LDM).
struct LqhTxReq {
  enum Word : uint8_t { kTxHi, kTxLo, kTcInstance, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

// kLqhCommitConf, kLqhAbortConf (LDM -> TC).
struct LqhTxConf {
  enum Word : uint8_t { kTxHi, kTxLo, kLdmInstance, kOps, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

// ---- scans -------------------------------------------------------------------------

struct ScanReq {  // API -> TC
  enum Word : uint8_t {
    kApiConn,
    kTxHi,
    kTxLo,
    kScanId,
    kTableId,
    kTableVersion,
    kIndexId,
    kFlags,
    kLock,
    kBatchRows,
    kWordCount
  };
  enum Section : uint8_t { kBounds, kFilter, kColumns, kSectionCount };
};

struct ScanFragReq {  // TC -> LDM
  enum Word : uint8_t {
    kTcScan,
    kTxHi,
    kTxLo,
    kTableId,
    kTableVersion,
    kIndexId,
    kFlags,
    kLock,
    kPartition,
    kBatchRows,
    kApiNode,
    kApiConn,
    kScanId,
    kWordCount
  };
  enum Section : uint8_t { kBounds, kFilter, kColumns, kSectionCount };
};

// kScanFragNextReq, kScanFragCloseReq (TC -> LDM).
struct ScanFragNext {
  enum Word : uint8_t { kTcScan, kPartition, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

struct ScanFragConf {  // LDM -> TC
  enum Word : uint8_t { kTcScan, kPartition, kRows, kMessages, kFinished, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

struct ScanFragRef {  // LDM -> TC
  enum Word : uint8_t { kTcScan, kPartition, kError, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

struct ScanRows {  // LDM -> API
  enum Word : uint8_t { kApiConn, kScanId, kRows, kWordCount };
  enum Section : uint8_t { kData, kSectionCount };
};

struct ScanConf {  // TC -> API
  enum Word : uint8_t { kApiConn, kScanId, kRows, kMessages, kFinished, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

struct ScanRef {  // TC -> API
  enum Word : uint8_t { kApiConn, kScanId, kError, kWordCount };
  // The API finds a scan by the first two words of each of its answers.
  static_assert(int{ScanConf::kApiConn} == int{ScanRows::kApiConn});
  static_assert(int{ScanConf::kScanId} == int{ScanRows::kScanId});
  static_assert(int{ScanRef::kApiConn} == int{ScanRows::kApiConn});
  static_assert(int{ScanRef::kScanId} == int{ScanRows::kScanId});
  enum Section : uint8_t { kSectionCount };
};

// kScanNextReq, kScanCloseReq (API -> TC).
struct ScanNext {
  enum Word : uint8_t { kApiConn, kScanId, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

// ---- schema ------------------------------------------------------------------------

struct SchemaRef {  // DICT -> API
  enum Word : uint8_t { kRequestId, kError, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

// kCreateTableReq/Conf, kDropTableReq/Conf, kGetTableReq/Conf.
struct SchemaMessage {
  enum Word : uint8_t { kRequestId, kWordCount };
  enum Section : uint8_t { kPayload, kSectionCount };
};

struct SchemaInstall {  // DICT -> TC and LDM
  enum Word : uint8_t { kInstallId, kTableId, kDrop, kWordCount };
  enum Section : uint8_t { kTable, kSectionCount };
};

struct SchemaInstallConf {  // TC/LDM -> DICT
  enum Word : uint8_t { kInstallId, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

struct ApiRegReq {  // API -> DICT
  enum Word : uint8_t { kRequestId, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

struct ApiRegConf {  // DICT -> API
  enum Word : uint8_t { kRequestId, kTcInstances, kLdmInstances, kDefaultPartitions, kWordCount };
  enum Section : uint8_t { kSectionCount };
};

}  // namespace fjord::engine::protocol::layout
