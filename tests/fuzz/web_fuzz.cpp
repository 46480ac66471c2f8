// libFuzzer target: the HTTP API's request handling (web/server.h Server::handle, the same
// handling `gputune serve` gives a connection): the request line and headers (cpp-httplib's),
// routing, query parameters, path ids, the token, JSON bodies and the submitted files of POST
// /api/jobs. The input is the raw request; the database holds a kernel measured on two devices in
// several contexts (tests/tuned_store.h), so that ids 1 and 2 and the select route find data.
// The write token is "fuzz-token". Every request must be answered or refused with a 4xx; a 500
// (an exception a handler let through: input that was not validated) is a finding, as is a crash.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "db/store.h"
#include "fuzz_util.h"
#include "tuned_store.h"
#include "web/server.h"

using namespace gputune;

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

web::Server& server() {
  static const std::unique_ptr<web::Server> s = [] {
    const std::string db_path = (fuzz::scratch() / "web.db").string();
    {
      db::Store store(db_path);
      const std::filesystem::path examples =
          std::filesystem::path(GPUTUNE_SOURCE_DIR) / "configs/examples";
      const std::int64_t run = store.begin_run(
          store.upsert_job("vector_add", "v.json", read_text(examples / "vector_add.json")),
          "brute_force", 9);
      const std::int64_t k = store.upsert_kernel("vector_add", "abc123", "source");
      auto context = [&](const std::string& device, int cc, const std::string& label, long size) {
        return test::vector_add_context(store, k, device, cc, 100, label, size);
      };
      auto measure = [&](std::int64_t ctx, int block, int tile, double ms) {
        test::vector_add_measurement(store, run, k, ctx, block, tile, ms);
      };
      const auto h1 = context("NVIDIA H100", 9, "1M", 1 << 20),
                 h16 = context("NVIDIA H100", 9, "16M", 1 << 24),
                 a1 = context("NVIDIA RTX A4000", 8, "1M", 1 << 20);
      measure(h1, 128, 1, 1.0), measure(h1, 256, 2, 1.2);
      measure(h16, 128, 1, 12), measure(h16, 256, 2, 10);
      measure(a1, 64, 1, 3.0), measure(a1, 128, 1, 3.5);
    }
    return std::make_unique<web::Server>(
        web::ServerOptions{db_path, "fuzz-token", "127.0.0.1", 0, {}});
  }();
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string response = server().handle(fuzz::text(data, size));
  if (response.rfind("HTTP/1.1 500", 0) == 0)
    fuzz::finding("500 Internal Server Error:\n" + response.substr(0, 2000));
  return 0;
}
