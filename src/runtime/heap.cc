#include "runtime/heap.h"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace quantkit::runtime {

void KeepFreedMemoryForReuse() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    // Blocks below 1 GiB come from the heap (and return to it when freed); the heap top is
    // given back to the system only beyond 1 GiB of free space.
    constexpr int kOneGiB = 1 << 30;
    mallopt(M_MMAP_THRESHOLD, kOneGiB);
    mallopt(M_TRIM_THRESHOLD, kOneGiB);
  });
#endif
}

}  // namespace quantkit::runtime
