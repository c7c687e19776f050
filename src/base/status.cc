#include "base/status.h"

namespace dsh {

std::string Status::ToString() const {
  if (ok()) return "ok";
  return code_ + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace dsh
