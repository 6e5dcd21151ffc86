// Creates DataMemory (the page pool every LDM instance shares) and one LDM
// block per ldm thread.
#include "fjord/engine/storage/page_pool.h"
#include "node_internal.h"

namespace fjord::engine {

Status DataNode::Impl::add_ldm_blocks() {
  storage::PagePoolConfig pool_config;
  pool_config.data_memory_bytes = node->params.get_uint("DataMemory");
  auto created = storage::PagePool::create(pool_config);
  if (!created) return Status(created.status().code(), node->origin + ": DataMemory: " + created.status().message());
  pool = std::move(created).value();
  // The LDM block joins here when it lands (branch ldm).
  return Status::ok();
}

}  // namespace fjord::engine
