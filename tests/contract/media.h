// The media the contract suite runs over, and how to configure a link of
// each for a test. Adding a transporter to the suite = one entry in media.cpp.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "fjord/transport/types.h"

namespace fjord::test {

struct Medium {
  std::string type;  // registered transporter name
  // One config section for a link between a and b (a is the server), with
  // extra "Key=value" lines appended. Must give each call a fresh endpoint.
  std::string (*section)(NodeId a, NodeId b, const std::string& extra_lines);
  // Both ends must live in one process (sim): a test that runs the peer in
  // another process cannot apply, and skips with a reason.
  bool in_process_only = false;
  // The name tests show when it is not `type` (the same transporter with
  // settings of its own, such as TCP with TLS).
  std::string label;

  const std::string& name() const { return label.empty() ? type : label; }
};

// For readable test names and failure messages.
inline void PrintTo(const Medium& medium, std::ostream* os) { *os << medium.name(); }

// Media with a registered factory in this build (not yet probed).
std::vector<Medium> contract_media();
const Medium* find_medium(const std::string& type);

}  // namespace fjord::test
