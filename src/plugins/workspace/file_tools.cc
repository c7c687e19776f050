#include "plugins/workspace/file_tools.h"
