#include "plugins/workspace/sandbox.h"
