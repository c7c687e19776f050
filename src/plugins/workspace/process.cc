#include "plugins/workspace/process.h"
