/** \file web/client.h
 * Owns: the HTTP client side of `gputune submit` and `gputune cancel`.
 * Must not: touch the database directly (the server does). */
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace gputune::web {

struct Reply {
  int status = 0;       ///< HTTP status; 0 when the server could not be reached
  nlohmann::json body;  ///< the JSON answer (or {"error": ...})
};

/// POSTs `body` to URL + path with the bearer token. URL like http://127.0.0.1:8080.
Reply post_json(const std::string& url, const std::string& path, const std::string& token,
                const nlohmann::json& body);

}  // namespace gputune::web
