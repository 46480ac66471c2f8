// Against the layers: the HTTP server's plumbing is web/'s own (tests/CMakeLists.txt).
#include "web/server_impl.h"
