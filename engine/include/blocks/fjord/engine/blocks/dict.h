// DICT: the schema block (NDB's DBDICT). One instance per data node, on the
// main thread (or the single thread).
//
// It creates, drops and describes tables for API nodes, assigns table and
// index ids, creates the hidden table behind each unique index (unique key
// columns, then the primary key columns; primary key = the unique key), and
// installs every table in each TC and LDM instance before it confirms. Schema
// requests run one at a time; later ones wait in order.
//
// Thread: the main (or single) thread. Not on the hot path.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fjord/engine/blocks/protocol_faults.h"
#include "fjord/engine/protocol.h"
#include "fjord/engine/runtime/block.h"

namespace fjord::engine {

class DictBlock final : public Block {
 public:
  DictBlock(uint16_t tc_instances, uint16_t ldm_instances, uint32_t default_partitions);
  void execute(const Signal& signal, BlockContext& context) override;

  // Read-only views for tests and the node's status output.
  std::size_t table_count() const { return tables_.size(); }

 private:
  struct Request {
    Address from;
    uint16_t number = 0;
    uint32_t request_id = 0;
    std::vector<std::byte> payload;
  };
  void accept(const Signal& signal, BlockContext& context);
  void install_conf(const Signal& signal, BlockContext& context);
  void start_next(BlockContext& context);
  void create(const Request& r, BlockContext& context);
  void drop(const Request& r, BlockContext& context);
  void describe(const Request& r, BlockContext& context);
  void install(const std::vector<TableDef>& tables, const std::vector<uint32_t>& drops, BlockContext& context);
  void reply(BlockContext& context);
  void refuse(const Request& r, protocol::ErrorCode error, BlockContext& context);

  ProtocolFaults faults_;  // signals refused as malformed or out of place
  uint16_t tc_instances_;
  uint16_t ldm_instances_;
  uint32_t default_partitions_;
  uint32_t next_id_ = 1;
  uint32_t next_version_ = 1;
  std::map<std::string, TableDef> tables_;  // by name, hidden tables included
  std::deque<Request> queue_;
  Request current_;  // the request being served
  bool busy_ = false;
  uint32_t install_id_ = 0;
  uint32_t confs_awaited_ = 0;
  std::vector<std::byte> reply_;  // the payload of the reply when the install completes
  uint16_t reply_number_ = 0;
};

}  // namespace fjord::engine
