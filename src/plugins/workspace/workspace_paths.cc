#include "plugins/workspace/workspace_paths.h"
