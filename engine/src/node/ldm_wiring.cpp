// Creates DataMemory (the page pool every LDM instance shares) and one LDM
// block per ldm thread (the single thread in single-threaded mode).
#include <algorithm>

#include "fjord/base/huge_pages.h"
#include "fjord/base/log.h"
#include "fjord/engine/blocks/ldm.h"
#include "fjord/engine/storage/page_pool.h"
#include "node_internal.h"

namespace fjord::engine {
namespace {
constexpr uint64_t kDerivedLocalScansCap = 16384;
}  // namespace

Status DataNode::Impl::add_ldm_blocks() {
  storage::PagePoolConfig pool_config;
  pool_config.data_memory_bytes = node->params.get_uint("DataMemory");
  pool_config.huge_pages = node->params.get_bool("DataMemoryHugePages");
  auto created = storage::PagePool::create(pool_config);
  if (!created) return Status(created.status().code(), node->origin + ": DataMemory: " + created.status().message());
  pool = std::move(created).value();
  if (pool_config.huge_pages) {
    const std::string mode = transparent_huge_page_mode();
    if (mode == "always" || mode == "madvise")
      FJORD_LOG_INFO("node %u: DataMemory %s on transparent huge pages (THP mode %s)", self,
                     storage::format_memory_size(pool_config.data_memory_bytes).c_str(), mode.c_str());
    else
      FJORD_LOG_WARN("node %u: DataMemoryHugePages is set but transparent huge pages are %s here: 4 KB pages", self,
                     (mode.empty() ? std::string("absent") : "'" + mode + "'").c_str());
  }
  // A scan opens one LDM scan record per partition it reads, so the LDMs
  // need MaxNoOfConcurrentScans x PartitionsPerTable per TC for every TC
  // scan to run at once (NDB derives MaxNoOfLocalScans from its TC and
  // scan records likewise). The derived figure is capped: a record holds an
  // ordered-index cursor, about 3 KB.
  uint64_t local_scans = node->params.get_uint("MaxNoOfLocalScans");
  if (local_scans == 0) {
    local_scans =
        std::min<uint64_t>(kDerivedLocalScansCap, uint64_t{tc_count} * node->params.get_uint("MaxNoOfConcurrentScans") *
                                                      node->params.get_uint("PartitionsPerTable"));
    FJORD_LOG_INFO("node %u: MaxNoOfLocalScans %llu (derived), %llu per LDM instance", self,
                   static_cast<unsigned long long>(local_scans),
                   static_cast<unsigned long long>((local_scans + ldm_count - 1) / ldm_count));
  }
  for (uint32_t i = 0; i < ldm_count; ++i) {
    LdmOptions o;
    o.instance = static_cast<uint16_t>(i);
    o.ldm_instances = static_cast<uint16_t>(ldm_count);
    o.max_operations = static_cast<uint32_t>(node->params.get_uint("MaxNoOfConcurrentOperations"));
    o.max_scans = static_cast<uint32_t>(std::max<uint64_t>(1, (local_scans + ldm_count - 1) / ldm_count));
    auto block = std::make_unique<LdmBlock>(*pool, o);
    ldm_blocks.push_back(block.get());
    if (Status s = runtime->add_block(std::move(block), ThreadType::kLdm, i); !s) return s;
  }
  return Status::ok();
}

}  // namespace fjord::engine
