#include "fjord/client.h"

#include "builtin_transporters.h"

namespace fjord {

transport::TransporterRegistry& client_registry() { return tools::builtin_registry(); }

}  // namespace fjord
