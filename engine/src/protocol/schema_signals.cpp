// Encoders and validating decoders of the schema signals (API <-> DICT,
// DICT -> TC and LDM).
#include <cstring>
#include <string>

#include "fjord/engine/protocol.h"
#include "signal_codec.h"

namespace fjord::engine::protocol {
using namespace detail;  // this library's own helpers (signal_codec.h)

// ---- schema --------------------------------------------------------------------------

SignalOut encode(const SchemaRef& m) {
  using L = layout::SchemaRef;
  return Out<L>(gsn::kSchemaRef).w(L::kRequestId, m.request_id).w(L::kError, static_cast<uint32_t>(m.error)).done();
}

Result<SchemaRef> decode_schema_ref(const Signal& s) {
  using L = layout::SchemaRef;
  if (Status st = shape<L>(s, gsn::kSchemaRef); !st) return st;
  if (Status st = check_error_code(gsn::kSchemaRef, s.word(L::kError)); !st) return st;
  return SchemaRef{s.word(L::kRequestId), static_cast<ErrorCode>(s.word(L::kError))};
}

SignalOut encode(const SchemaMessage& m) {
  FJORD_ASSERT(m.number >= gsn::kCreateTableReq);
  FJORD_ASSERT(m.number <= gsn::kGetTableConf);
  using L = layout::SchemaMessage;
  return Out<L>(m.number).w(L::kRequestId, m.request_id).section(L::kPayload, m.payload).done();
}

Result<SchemaMessage> decode_schema_message(const Signal& s) {
  using L = layout::SchemaMessage;
  const uint16_t n = s.number();
  if (n < gsn::kCreateTableReq || n > gsn::kGetTableConf) return bad(n, "not a schema request or confirmation");
  if (Status st = shape<L>(s, n); !st) return st;
  SchemaMessage m{n, s.word(L::kRequestId), section_of<L>(s, L::kPayload)};
  const bool needs_payload = n != gsn::kDropTableConf;
  if (needs_payload && m.payload.empty()) return bad(n, "schema message without its payload");
  if ((n == gsn::kDropTableReq || n == gsn::kGetTableReq) && m.payload.size() > 128)
    return bad(n, "table name too long");
  return m;
}

SignalOut encode(const SchemaInstall& m) {
  using L = layout::SchemaInstall;
  return Out<L>(gsn::kSchemaInstall)
      .w(L::kInstallId, m.install_id)
      .w(L::kTableId, m.table_id)
      .w(L::kDrop, m.drop ? 1 : 0)
      .section(L::kTable, m.table)
      .done();
}

Result<SchemaInstall> decode_schema_install(const Signal& s) {
  using L = layout::SchemaInstall;
  if (Status st = shape<L>(s, gsn::kSchemaInstall); !st) return st;
  const uint32_t drop = s.word(L::kDrop);
  if (drop > 1) return bad(gsn::kSchemaInstall, "drop flag " + std::to_string(drop));
  SchemaInstall m{s.word(L::kInstallId), s.word(L::kTableId), drop == 1, section_of<L>(s, L::kTable)};
  if (m.drop != m.table.empty()) return bad(gsn::kSchemaInstall, "install needs a table, drop takes none");
  if (m.table_id == 0 || m.table_id > kMaxTableId)
    return bad(gsn::kSchemaInstall,
               "table id " + std::to_string(m.table_id) + " outside 1.." + std::to_string(kMaxTableId));
  return m;
}

Result<TableDef> decode_installed_table(const SchemaInstall& m) {
  FJORD_ASSERT(!m.drop);
  auto def = decode_table(m.table);
  if (!def) return bad(gsn::kSchemaInstall, def.status().message());
  if (def->table_id != m.table_id)
    return bad(gsn::kSchemaInstall, "table '" + def->name + "' has id " + std::to_string(def->table_id) +
                                        ", the install names " + std::to_string(m.table_id));
  if (def->partitions == 0 || def->partitions > kMaxPartitions)
    return bad(gsn::kSchemaInstall, "table '" + def->name + "' has " + std::to_string(def->partitions) +
                                        " partitions, not 1.." + std::to_string(kMaxPartitions));
  for (const IndexDef& index : def->indexes)
    if (index.index_id == 0 || index.index_id > kMaxTableId)
      return bad(gsn::kSchemaInstall, "index '" + index.name + "' has id " + std::to_string(index.index_id) +
                                          ", outside 1.." + std::to_string(kMaxTableId));
  return def;
}

SignalOut encode(const SchemaInstallConf& m) {
  using L = layout::SchemaInstallConf;
  return Out<L>(gsn::kSchemaInstallConf).w(L::kInstallId, m.install_id).done();
}

Result<SchemaInstallConf> decode_schema_install_conf(const Signal& s) {
  using L = layout::SchemaInstallConf;
  if (Status st = shape<L>(s, gsn::kSchemaInstallConf); !st) return st;
  return SchemaInstallConf{s.word(L::kInstallId)};
}

SignalOut encode(const ApiRegReq& m) {
  using L = layout::ApiRegReq;
  return Out<L>(gsn::kApiRegReq).w(L::kRequestId, m.request_id).done();
}

Result<ApiRegReq> decode_api_reg_req(const Signal& s) {
  using L = layout::ApiRegReq;
  if (Status st = shape<L>(s, gsn::kApiRegReq); !st) return st;
  return ApiRegReq{s.word(L::kRequestId)};
}

SignalOut encode(const ApiRegConf& m) {
  using L = layout::ApiRegConf;
  return Out<L>(gsn::kApiRegConf)
      .w(L::kRequestId, m.request_id)
      .w(L::kTcInstances, m.tc_instances)
      .w(L::kLdmInstances, m.ldm_instances)
      .w(L::kDefaultPartitions, m.default_partitions)
      .done();
}

Result<ApiRegConf> decode_api_reg_conf(const Signal& s) {
  using L = layout::ApiRegConf;
  if (Status st = shape<L>(s, gsn::kApiRegConf); !st) return st;
  const uint32_t tc_instances = s.word(L::kTcInstances);
  const uint32_t ldm_instances = s.word(L::kLdmInstances);
  const uint32_t partitions = s.word(L::kDefaultPartitions);
  if (tc_instances == 0 || tc_instances > 64 || ldm_instances == 0 || ldm_instances > 64)
    return bad(gsn::kApiRegConf, "instance counts out of range");
  if (partitions == 0 || partitions > kMaxPartitions) return bad(gsn::kApiRegConf, "partition count out of range");
  return ApiRegConf{s.word(L::kRequestId), static_cast<uint16_t>(tc_instances), static_cast<uint16_t>(ldm_instances),
                    partitions};
}

}  // namespace fjord::engine::protocol
