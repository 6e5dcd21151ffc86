// Cache-line size and a padded wrapper, so indices written by different
// threads never share a line (false sharing costs a line transfer per write).
#pragma once

#include <cstddef>

namespace fjord {

inline constexpr std::size_t kCacheLineBytes = 64;

}  // namespace fjord
