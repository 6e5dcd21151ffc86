#include "builtin_transporters.h"

#include "fjord/tcp/tcp.h"
#ifdef FJORD_HAVE_SHM
#include "fjord/shm/shm.h"
#endif
#ifdef FJORD_HAVE_SIM
#include "fjord/sim/sim.h"
#endif
#ifdef FJORD_HAVE_RDMA
#include "fjord/rdma/rdma.h"
#endif
#ifdef FJORD_HAVE_DPDK
#include "fjord/dpdk/dpdk.h"
#endif

namespace fjord::tools {

Status register_builtin_transporters(transport::TransporterRegistry& registry) {
  if (Status s = tcp::register_tcp_transporter(registry); !s) return s;
#ifdef FJORD_HAVE_SHM
  if (Status s = shm::register_shm_transporter(registry); !s) return s;
#endif
#ifdef FJORD_HAVE_SIM
  if (Status s = sim::register_sim_transporter(registry); !s) return s;
#endif
#ifdef FJORD_HAVE_RDMA
  if (Status s = rdma::register_rdma_transporter(registry); !s) return s;
#endif
#ifdef FJORD_HAVE_DPDK
  if (Status s = dpdk::register_dpdk_transporter(registry); !s) return s;
#endif
  return Status::ok();
}

transport::TransporterRegistry& builtin_registry() {
  static transport::TransporterRegistry& registry = []() -> transport::TransporterRegistry& {
    auto& r = transport::TransporterRegistry::global();
    const Status s = register_builtin_transporters(r);
    FJORD_ASSERT_MSG(s.is_ok(), "registering the built-in transporters failed");
    return r;
  }();
  return registry;
}

}  // namespace fjord::tools
