#include "base/allocator.h"

#ifdef DSH_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace dsh {

std::string AllocatorName() {
#ifdef DSH_JEMALLOC
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr) {
    return std::string("jemalloc ") + version;
  }
  return "jemalloc";
#else
  return "system malloc";
#endif
}

}  // namespace dsh
