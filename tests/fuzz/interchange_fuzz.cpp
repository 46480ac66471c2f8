// libFuzzer target: the Kernel Tuner cache and T4 importers (db/interchange.h). The input is the
// measurement file's bytes (gzip-compressed or not), written to a file as `gputune import` reads
// one: read_measurement_file, then import_measurements into an in-memory database (a
// Kernel Tuner file names its kernel and device; the others get them from the "command line").
// std::runtime_error naming the file is the documented refusal; a database error (db::DbError),
// another exception, or an error that does not name the file is a finding.
#include <cstdint>
#include <memory>
#include <string>

#include "db/interchange.h"
#include "db/sqlite.h"
#include "db/store.h"
#include "fuzz_util.h"

using namespace gputune;

namespace {

void expect_names_file(const std::runtime_error& e, const std::string& path) {
  if (std::string(e.what()).find(path) == std::string::npos)
    fuzz::finding(std::string("an error that does not name the file: ") + e.what());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = (fuzz::scratch() / "measurements.json").string();
  // A fresh database now and then: imports that succeed add a run each.
  static std::unique_ptr<db::Store> store;
  static int uses = 0;
  if (!store || ++uses % 512 == 0) store = std::make_unique<db::Store>(":memory:");
  fuzz::write_file(path, fuzz::text(data, size));
  try {
    db::MeasurementFile f = db::read_measurement_file(path);
    (void)db::whole_problem_size(f.problem_size);
  } catch (const db::DbError& e) {
    fuzz::finding(std::string("a database error: ") + e.what());
  } catch (const std::runtime_error& e) {
    expect_names_file(e, path);
  }
  try {
    db::import_measurements(*store, path, {"fuzz_kernel", "fuzz device", ""});
  } catch (const db::DbError& e) {
    fuzz::finding(std::string("a database error: ") + e.what());
  } catch (const std::runtime_error& e) {
    expect_names_file(e, path);
  }
  return 0;
}
