#include "fjord/base/mirrored_map.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace fjord {

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t round_up_to_pages(std::size_t bytes) {
  const std::size_t p = page_size();
  return (bytes + p - 1) / p * p;
}

MirroredMap::MirroredMap(MirroredMap&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MirroredMap& MirroredMap::operator=(MirroredMap&& other) noexcept {
  if (this != &other) {
    if (base_) ::munmap(base_, 2 * size_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MirroredMap::~MirroredMap() {
  if (base_) ::munmap(base_, 2 * size_);
}

Result<MirroredMap> MirroredMap::map(int fd, uint64_t offset, std::size_t size) {
  FJORD_ASSERT(size > 0);
  FJORD_ASSERT(size % page_size() == 0);
  FJORD_ASSERT(offset % page_size() == 0);
  // Reserve 2*size of address space, then place the file range twice inside it.
  void* reserved = ::mmap(nullptr, 2 * size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return io_error("mmap reserve " + std::to_string(2 * size) + " bytes", errno);
  auto* base = static_cast<std::byte*>(reserved);
  for (int half = 0; half < 2; ++half) {
    void* want = base + half * size;
    void* got = ::mmap(want, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(offset));
    if (got == MAP_FAILED) {
      const int err = errno;
      ::munmap(base, 2 * size);
      return io_error("mmap ring half " + std::to_string(half), err);
    }
  }
  MirroredMap out;
  out.base_ = base;
  out.size_ = size;
  return out;
}

Result<MirroredMap> MirroredMap::anonymous(std::size_t size, const char* name) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
  if (!fd.valid()) return io_error("memfd_create", errno);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return io_error("ftruncate memfd", errno);
  return map(fd.get(), 0, size);
}

}  // namespace fjord
