#pragma once

#include <string>

namespace dsh {

// The memory allocator this build of dsh uses, for logs and tests:
// "jemalloc 5.3.0-…" when linked with jemalloc (the default build, see
// DSH_JEMALLOC in CMakeLists.txt), else "system malloc" (sanitizer builds,
// whose runtime brings its own).
std::string AllocatorName();

}  // namespace dsh
