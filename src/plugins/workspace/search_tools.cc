#include "plugins/workspace/search_tools.h"
