#include "fjord/engine/blocks/dict.h"

#include "fjord/base/log.h"

namespace fjord::engine {

using namespace protocol;

DictBlock::DictBlock(uint16_t tc_instances, uint16_t ldm_instances, uint32_t default_partitions)
    : Block(block_numbers::kDict, 0, "DICT"),
      faults_("DICT"),
      tc_instances_(tc_instances),
      ldm_instances_(ldm_instances),
      default_partitions_(default_partitions) {}

void DictBlock::execute(const Signal& signal, BlockContext& context) {
  switch (signal.number()) {
    case gsn::kCreateTableReq:
    case gsn::kDropTableReq:
    case gsn::kGetTableReq: accept(signal, context); break;
    case gsn::kApiRegReq: {
      // Answered even when malformed (request id 0): the API then fails on
      // the id, not on a silent wait.
      auto req = decode_api_reg_req(signal);
      if (!req) faults_.refuse(signal, req.status().message());
      const uint32_t request_id = req ? req->request_id : 0;
      const SignalOut out = encode(ApiRegConf{request_id, tc_instances_, ldm_instances_, default_partitions_});
      context.send(signal.sender_address(), out.number, out.data());
      break;
    }
    case gsn::kSchemaInstallConf: install_conf(signal, context); break;
    default: faults_.refuse(signal, "a signal DICT does not serve");
  }
}

void DictBlock::install_conf(const Signal& signal, BlockContext& context) {
  auto conf = decode_schema_install_conf(signal);
  if (!conf) return faults_.refuse(signal, conf.status().message());
  // Installs go to this node's TC and LDM instances only.
  if (signal.sender_node != context.self_node())
    return faults_.refuse(signal, "a schema install confirmation from another node");
  if (!busy_ || conf->install_id != install_id_)
    return faults_.refuse(signal, "a confirmation of no install in progress");
  FJORD_ASSERT(confs_awaited_ > 0);
  if (--confs_awaited_ == 0) {
    busy_ = false;
    reply(context);
    start_next(context);
  }
}

void DictBlock::accept(const Signal& signal, BlockContext& context) {
  auto m = decode_schema_message(signal);
  if (!m) {
    faults_.refuse(signal, m.status().message());
    using L = protocol::layout::SchemaMessage;
    const uint32_t request_id = signal.word_count() > L::kRequestId ? signal.word(L::kRequestId) : 0;
    const SignalOut out = encode(SchemaRef{request_id, ErrorCode::kBadRequest});
    context.send(signal.sender_address(), out.number, out.data(), out.section_list());
    return;
  }
  queue_.push_back(Request{signal.sender_address(), m->number, m->request_id, {m->payload.begin(), m->payload.end()}});
  if (!busy_) start_next(context);
}

void DictBlock::start_next(BlockContext& context) {
  while (!busy_ && !queue_.empty()) {
    current_ = std::move(queue_.front());
    queue_.pop_front();
    if (current_.number == gsn::kCreateTableReq)
      create(current_, context);
    else if (current_.number == gsn::kDropTableReq)
      drop(current_, context);
    else
      describe(current_, context);
  }
}

void DictBlock::refuse(const Request& r, ErrorCode error, BlockContext& context) {
  const SignalOut out = encode(SchemaRef{r.request_id, error});
  context.send(r.from, out.number, out.data(), out.section_list());
}

void DictBlock::create(const Request& r, BlockContext& context) {
  auto decoded = decode_table(r.payload);
  if (!decoded) {
    FJORD_LOG_WARN("DICT: refused table from node %u: %s", r.from.node, decoded.status().message().c_str());
    return refuse(r, ErrorCode::kBadRequest, context);
  }
  TableDef base = std::move(decoded).value();
  if (tables_.count(base.name) || base.name.find('$') != std::string::npos)
    return refuse(r, tables_.count(base.name) ? ErrorCode::kTableExists : ErrorCode::kBadRequest, context);
  if (base.partitions == 0) base.partitions = default_partitions_;
  // The table's id and one per index.
  if (kMaxTableId - next_id_ + 1 < 1 + base.indexes.size()) return refuse(r, ErrorCode::kTooManyTables, context);
  base.table_id = next_id_++;
  base.version = next_version_++;
  std::vector<TableDef> install_list;
  for (IndexDef& index : base.indexes) {
    index.index_id = next_id_++;
    if (index.kind != IndexKind::kUnique) continue;
    TableDef hidden = hidden_unique_table(base, index);
    hidden.table_id = index.index_id;  // a unique index's id is its hidden table's id
    hidden.version = base.version;
    install_list.push_back(std::move(hidden));
  }
  install_list.insert(install_list.begin(), base);  // base first: TC resolves unique indexes after
  for (const TableDef& t : install_list) tables_[t.name] = t;
  reply_number_ = gsn::kCreateTableConf;
  reply_ = encode_table(base);
  FJORD_LOG_INFO("DICT: creating table '%s' id %u version %u, %u partitions, %zu indexes", base.name.c_str(),
                 base.table_id, base.version, base.partitions, base.indexes.size());
  install(install_list, {}, context);
}

void DictBlock::drop(const Request& r, BlockContext& context) {
  const std::string name(reinterpret_cast<const char*>(r.payload.data()), r.payload.size());
  auto it = tables_.find(name);
  if (it == tables_.end() || name.find('$') != std::string::npos) return refuse(r, ErrorCode::kNoSuchTable, context);
  std::vector<uint32_t> drops = {it->second.table_id};
  for (const IndexDef& index : it->second.indexes)
    if (index.kind == IndexKind::kUnique) {
      drops.push_back(index.index_id);
      tables_.erase(name + "$" + index.name);
    }
  tables_.erase(it);
  reply_number_ = gsn::kDropTableConf;
  reply_.clear();
  FJORD_LOG_INFO("DICT: dropping table '%s'", name.c_str());
  install({}, drops, context);
}

void DictBlock::describe(const Request& r, BlockContext& context) {
  const std::string name(reinterpret_cast<const char*>(r.payload.data()), r.payload.size());
  auto it = tables_.find(name);
  // A unique index's hidden table ("base$index") is DICT's, kept in step by
  // TC: described, it could be written directly and break its index.
  if (it == tables_.end() || name.find('$') != std::string::npos) return refuse(r, ErrorCode::kNoSuchTable, context);
  const std::vector<std::byte> bytes = encode_table(it->second);
  const SignalOut out = encode(SchemaMessage{gsn::kGetTableConf, r.request_id, bytes});
  context.send(r.from, out.number, out.data(), out.section_list());
}

void DictBlock::install(const std::vector<TableDef>& tables, const std::vector<uint32_t>& drops,
                        BlockContext& context) {
  ++install_id_;
  confs_awaited_ = 0;
  auto send_all = [&](const SignalOut& out) {
    for (uint16_t i = 0; i < tc_instances_; ++i)
      context.send({context.self_node(), {block_numbers::kTc, i}}, out.number, out.data(), out.section_list());
    for (uint16_t i = 0; i < ldm_instances_; ++i)
      context.send({context.self_node(), {block_numbers::kLdm, i}}, out.number, out.data(), out.section_list());
    confs_awaited_ += tc_instances_ + ldm_instances_;
  };
  for (const TableDef& t : tables) {
    const std::vector<std::byte> bytes = encode_table(t);
    send_all(encode(SchemaInstall{install_id_, t.table_id, false, bytes}));
  }
  for (uint32_t id : drops) send_all(encode(SchemaInstall{install_id_, id, true, {}}));
  busy_ = confs_awaited_ > 0;
  if (!busy_) reply(context);
}

void DictBlock::reply(BlockContext& context) {
  const SignalOut out = encode(SchemaMessage{reply_number_, current_.request_id, reply_});
  context.send(current_.from, out.number, out.data(), out.section_list());
}

}  // namespace fjord::engine
