#include "web/client.h"

#include <httplib.h>

namespace gputune::web {

Reply post_json(const std::string& url, const std::string& path, const std::string& token,
                const nlohmann::json& body) {
  Reply r;
  httplib::Client cli(url);
  cli.set_connection_timeout(5);
  cli.set_read_timeout(60);
  // The header and the body go out as two writes: without this Nagle holds the body for the
  // server's delayed ACK, 40 ms a submission (bench/results/load-vm-rebuilds-2026-11-28.md).
  cli.set_tcp_nodelay(true);
  httplib::Headers headers = {{"Authorization", "Bearer " + token}};
  auto res = cli.Post(path.c_str(), headers, body.dump(), "application/json");
  if (!res) {
    r.body = {{"error", "cannot reach " + url + " (" + httplib::to_string(res.error()) +
                            "); is `gputune serve` running?"}};
    return r;
  }
  r.status = res->status;
  try {
    r.body = nlohmann::json::parse(res->body);
  } catch (const nlohmann::json::exception&) {
    r.body = {{"error", res->body}};
  }
  return r;
}

}  // namespace gputune::web
