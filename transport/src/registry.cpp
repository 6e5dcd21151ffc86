#include "fjord/transport/registry.h"

namespace fjord::transport {

Status TransporterFactory::validate(const LinkConfig&) const { return Status::ok(); }
Status TransporterFactory::probe() const { return Status::ok(); }
std::string TransporterFactory::local_host() const { return "127.0.0.1"; }

TransporterRegistry& TransporterRegistry::global() {
  static TransporterRegistry registry;
  return registry;
}

Status TransporterRegistry::add(std::unique_ptr<TransporterFactory> factory) {
  FJORD_ASSERT(factory != nullptr);
  if (find(factory->name()))
    return Status(StatusCode::kAlreadyExists,
                  "transporter '" + std::string(factory->name()) + "' is already registered");
  factories_.push_back(std::move(factory));
  return Status::ok();
}

TransporterFactory* TransporterRegistry::find(std::string_view name) const {
  for (const auto& f : factories_)
    if (f->name() == name) return f.get();
  return nullptr;
}

std::vector<TransporterFactory*> TransporterRegistry::all() const {
  std::vector<TransporterFactory*> out;
  for (const auto& f : factories_) out.push_back(f.get());
  return out;
}

std::string TransporterRegistry::names() const {
  std::string out;
  for (const auto& f : factories_) {
    if (!out.empty()) out += ", ";
    out += f->name();
  }
  return out;
}

}  // namespace fjord::transport
