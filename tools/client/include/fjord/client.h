// The one header an application includes to use fjord: the API library
// (fjord/api/api.h) plus the registry of every transporter built into this
// installation (tcp, shm, sim, and rdma when it was built).
//
//   #include <fjord/client.h>
//   fjord::api::ConnectOptions o;
//   o.config_path = "cluster.ini";
//   o.node_id = 50;
//   o.registry = &fjord::client_registry();
//   auto connection = fjord::api::Connection::connect(o);       // one thread, or
//   auto cluster = fjord::api::ClusterConnection::connect(o);   // one per process,
//   auto session = (*cluster)->new_session();                   // and one per thread
//
// Build with: g++ -std=c++20 app.cpp $(pkg-config --cflags --libs fjord-client)
#pragma once

#include "fjord/api/api.h"
#include "fjord/transport/registry.h"

namespace fjord {

// The process-wide registry with the built-in transporters (filled on first use).
transport::TransporterRegistry& client_registry();

}  // namespace fjord
