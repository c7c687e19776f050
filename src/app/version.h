#pragma once

#include "base/version.h"

namespace dsh::app {
using dsh::kVersion;
}
