#include "plugins/workspace/web_fetch.h"
