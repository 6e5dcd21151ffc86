// libFuzzer target: the config parser, the link-table loader and the
// cluster config (nodes, node groups, the partition rule, the checksum) on
// arbitrary text, every error collected. Errors are fine; crashes, hangs,
// failed assertions and over-reads are not.
#include <cstdint>
#include <optional>
#include <string>

#include "fjord/engine/cluster_config.h"
#include "fjord/tcp/tcp.h"
#include "fjord/transport/config_file.h"
#include "fjord/transport/link_config.h"
#include "fjord/transport/registry.h"

using namespace fjord;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static transport::TransporterRegistry* registry = [] {
    auto* r = new transport::TransporterRegistry();
    (void)tcp::register_tcp_transporter(*r);
    return r;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Syntax errors do not stop the schema checks: both run on every input.
  config::Diagnostics diagnostics;
  const config::File file = config::parse_text(text, "fuzz.ini", diagnostics);
  (void)transport::load_link_table(file, *registry, {}, diagnostics);
  if (diagnostics.has_errors()) (void)diagnostics.status();
  config::Diagnostics cluster_diagnostics;
  const std::optional<engine::ClusterConfig> cluster =
      engine::load_cluster_config(file, *registry, cluster_diagnostics);
  if (!cluster) return 0;
  (void)engine::cluster_checksum(*cluster);
  const auto partitions =
      static_cast<uint32_t>(cluster->of_kind(engine::NodeKind::kData).front()->params.get_uint("PartitionsPerTable"));
  for (const engine::PartitionReplicas& r : engine::partition_map(cluster->layout, partitions))
    if (!cluster->node(r.primary())) __builtin_trap();
  return 0;
}
