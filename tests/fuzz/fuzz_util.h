// Helpers of the libFuzzer targets (tests/fuzz/*_fuzz.cpp): a scratch folder of the process, the
// input as text or as a file, and what a target does on a finding. Each target catches the
// errors its entry point documents (bad input, refused with a message); anything else escaping,
// a sanitizer report, a hang or a wrong answer is a finding: libFuzzer stops and writes the input.
// Must not: know about any entry point (each target has its own).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace gputune::fuzz {

/// The input as text.
inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// A folder of this process under $TMPDIR (else /tmp), removed at exit.
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/gputune-fuzz-" +
                          std::to_string(getpid()) + "-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("gputune fuzz: mkdtemp");
      std::abort();
    }
    static const std::string removed = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(removed, ec);
    });
    return std::filesystem::path(pattern);
  }();
  return dir;
}

/// Writes `bytes` to `path` whole (the entry points that read files read it back).
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) {
    std::fprintf(stderr, "gputune fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

/// A finding that is no crash (a wrong answer): says what, then aborts so that libFuzzer keeps the
/// input.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "gputune fuzz: FINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace gputune::fuzz
