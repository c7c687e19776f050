#pragma once

#include <cstdint>
#include <string>

namespace dsh::agent {

// An inbox message a turn took: its row (`num`, how the statements find it:
// the integer key costs a third of a lookup by id) and its id (for errors
// and the log's `message/user` events).
struct MessageRef {
  int64_t num = 0;
  std::string message_id;
};

}  // namespace dsh::agent
