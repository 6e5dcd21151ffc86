// The TCP transporter: the fallback medium, built only from ordinary socket
// calls (socket, bind, listen, accept4, connect, setsockopt, send, recv,
// poll, getpeername, shutdown, close) so that an LD_PRELOAD socket library
// (SCI Sockets, libvma) can accelerate it unchanged. See docs/transport.md.
//
// Programs call register_tcp_transporter() once at start-up; everything else
// goes through the registry and the Transporter contract.
#pragma once

#include "fjord/base/status.h"
#include "fjord/transport/registry.h"

namespace fjord::tcp {

Status register_tcp_transporter(transport::TransporterRegistry& registry);

}  // namespace fjord::tcp
