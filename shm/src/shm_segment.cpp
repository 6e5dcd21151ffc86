// Segment creation and attachment. Slow path.
#include "shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <new>
#include <utility>

namespace fjord::shm {
namespace {

constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW;

std::size_t segment_bytes(std::size_t ring_bytes) { return page_size() + 2 * ring_bytes; }

uint64_t ring_offset(Side writer, std::size_t ring_bytes) { return page_size() + writer * ring_bytes; }

Status protocol(const std::string& what) { return Status(StatusCode::kProtocolError, "shm segment: " + what); }

}  // namespace

Segment::Segment(Segment&& other) noexcept
    : memfd_(std::move(other.memfd_)),
      header_(std::exchange(other.header_, nullptr)),
      rings_{std::move(other.rings_[0]), std::move(other.rings_[1])} {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    if (header_) ::munmap(header_, page_size());
    memfd_ = std::move(other.memfd_);
    header_ = std::exchange(other.header_, nullptr);
    rings_[0] = std::move(other.rings_[0]);
    rings_[1] = std::move(other.rings_[1]);
  }
  return *this;
}

Segment::~Segment() {
  if (header_) ::munmap(header_, page_size());
}

Status Segment::map_all(std::size_t ring_bytes) {
  void* header = ::mmap(nullptr, page_size(), PROT_READ | PROT_WRITE, MAP_SHARED, memfd_.get(), 0);
  if (header == MAP_FAILED) return io_error("mmap shm header", errno);
  header_ = static_cast<SegmentHeader*>(header);
  for (Side side : {kClientSide, kServerSide}) {
    auto ring = MirroredMap::map(memfd_.get(), ring_offset(side, ring_bytes), ring_bytes);
    if (!ring) return ring.status();
    rings_[side] = std::move(ring).value();
    // Fault the page tables of both halves in now, not on the first lap of
    // the hot path. Older kernels lack MADV_POPULATE_WRITE: then the first
    // lap faults, which is only slower.
    (void)::madvise(rings_[side].data(), 2 * ring_bytes, MADV_POPULATE_WRITE);
  }
  return Status::ok();
}

Result<Segment> Segment::create(std::size_t ring_bytes) {
  FJORD_ASSERT(ring_bytes > 0);
  FJORD_ASSERT(ring_bytes % page_size() == 0);
  Segment s;
  s.memfd_.reset(::memfd_create("fjord-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!s.memfd_.valid()) return io_error("memfd_create", errno);
  const int fd = s.memfd_.get();
  if (::fchmod(fd, 0600) != 0) return io_error("fchmod shm segment 0600", errno);
  const auto bytes = static_cast<off_t>(segment_bytes(ring_bytes));
  if (::ftruncate(fd, bytes) != 0) return io_error("ftruncate shm segment", errno);
  // Allocate every page now: a machine short of memory fails here, with a
  // message, rather than with SIGBUS in the middle of a send.
  if (const int err = ::posix_fallocate(fd, 0, bytes); err != 0)
    return io_error("allocate " + std::to_string(bytes) + " bytes of shared memory", err);
  if (::fcntl(fd, F_ADD_SEALS, kRequiredSeals | F_SEAL_SEAL) != 0) return io_error("seal shm segment", errno);
  if (Status st = s.map_all(ring_bytes); !st) return st;
  auto* header = new (s.header_) SegmentHeader();
  header->header_bytes = static_cast<uint32_t>(sizeof(SegmentHeader));
  header->ring_bytes = ring_bytes;
  return s;
}

Result<Segment> Segment::attach(UniqueFd memfd, std::size_t ring_bytes) {
  if (ring_bytes == 0 || ring_bytes % page_size() != 0)
    return protocol("ring size " + std::to_string(ring_bytes) + " is not a multiple of the page size");
  struct stat st {};
  if (::fstat(memfd.get(), &st) != 0) return io_error("fstat shm segment", errno);
  if (static_cast<std::size_t>(st.st_size) != segment_bytes(ring_bytes))
    return protocol("segment is " + std::to_string(st.st_size) + " bytes, expected " +
                    std::to_string(segment_bytes(ring_bytes)));
  const int seals = ::fcntl(memfd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & kRequiredSeals) != kRequiredSeals)
    return protocol("segment size is not sealed (a peer could shrink it under us)");
  Segment s;
  s.memfd_ = std::move(memfd);
  if (Status status = s.map_all(ring_bytes); !status) return status;
  const SegmentHeader& h = *s.header_;
  if (h.magic != kSegmentMagic) return protocol("bad magic in the segment header");
  if (h.layout_version != kLayoutVersion)
    return protocol("layout version " + std::to_string(h.layout_version) + " (this node speaks " +
                    std::to_string(kLayoutVersion) + ")");
  if (h.header_bytes != sizeof(SegmentHeader) || h.ring_bytes != ring_bytes)
    return protocol("header describes a different layout (header " + std::to_string(h.header_bytes) + " bytes, rings " +
                    std::to_string(h.ring_bytes) + " bytes)");
  return s;
}

}  // namespace fjord::shm
