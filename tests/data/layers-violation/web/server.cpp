#include "db/sqlite.h"
