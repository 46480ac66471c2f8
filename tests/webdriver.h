// A minimal W3C WebDriver client for chromedriver (Debian's chromium-driver), enough to load
// pages, click, read text, run a script and take screenshots. Used by the dashboard tests and the
// page-load benchmark.
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>

namespace gputune::test {

inline const char* kElementKey = "element-6066-11e4-a52e-4f735466cecf";

inline std::string base64_decode(const std::string& in) {
  static const std::string chars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    auto p = chars.find(c);
    if (p == std::string::npos) continue;
    val = (val << 6) + static_cast<int>(p);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xff));
      bits -= 8;
    }
  }
  return out;
}

/// Finds chromium and chromedriver; empty reason when both are there.
inline std::string browser_missing() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromedriver"})
    if (!std::filesystem::exists(p))
      return std::string(p) + " is not installed (Debian packages chromium, chromium-driver)";
  return {};
}

class WebDriver {
 public:
  explicit WebDriver(int port = 9515 + (getpid() % 400)) : port_(port) {
    pid_ = fork();
    if (pid_ == 0) {
      std::string p = "--port=" + std::to_string(port_);
      int devnull = ::open("/dev/null", O_WRONLY);
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
      execl("/usr/bin/chromedriver", "chromedriver", p.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(60);
    for (int i = 0; i < 100; ++i) {
      if (auto r = client_->Get("/status"); r && r->status == 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    nlohmann::json caps = {{"capabilities",
                            {{"alwaysMatch",
                              {{"goog:chromeOptions",
                                {{"binary", "/usr/bin/chromium"},
                                 {"args",
                                  {"--headless=new", "--no-sandbox", "--disable-gpu",
                                   "--disable-dev-shm-usage", "--window-size=1300,1500"}}}}}}}}};
    auto r = call("POST", "/session", caps);
    session_ = r["value"]["sessionId"].get<std::string>();
  }
  ~WebDriver() {
    if (!session_.empty()) client_->Delete(("/session/" + session_).c_str());
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }

  nlohmann::json call(const std::string& method, const std::string& path,
                      const nlohmann::json& body = nlohmann::json::object()) {
    httplib::Result r = method == "GET" ? client_->Get(path.c_str())
                        : method == "DELETE"
                            ? client_->Delete(path.c_str())
                            : client_->Post(path.c_str(), body.dump(), "application/json");
    if (!r) throw std::runtime_error("chromedriver did not answer " + method + " " + path);
    auto j = nlohmann::json::parse(r->body);
    if (r->status != 200)
      throw std::runtime_error("webdriver " + path + ": " + r->body.substr(0, 500));
    return j;
  }
  std::string s(const std::string& p) const { return "/session/" + session_ + p; }

  void go(const std::string& url) { call("POST", s("/url"), {{"url", url}}); }
  nlohmann::json script(const std::string& js) {
    return call("POST", s("/execute/sync"),
                {{"script", js}, {"args", nlohmann::json::array()}})["value"];
  }
  /// Waits until the page's script marked it loaded (or showed an error); returns false on timeout.
  bool wait_loaded(double seconds = 20) {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      auto v = script(
          "return document.body && (document.body.getAttribute('data-loaded') || "
          "(document.getElementById('error') ? 'error' : null));");
      if (!v.is_null()) return v == "1";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  std::string find(const std::string& css) {
    auto v = call("POST", s("/element"), {{"using", "css selector"}, {"value", css}})["value"];
    return v[kElementKey].get<std::string>();
  }
  void click(const std::string& css) { call("POST", s("/element/" + find(css) + "/click")); }
  std::string text(const std::string& css) {
    return call("GET", s("/element/" + find(css) + "/text"))["value"].get<std::string>();
  }
  void screenshot(const std::filesystem::path& file) {
    auto b64 = call("GET", s("/screenshot"))["value"].get<std::string>();
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << base64_decode(b64);
  }

 private:
  int port_;
  pid_t pid_ = -1;
  std::unique_ptr<httplib::Client> client_;
  std::string session_;
};

}  // namespace gputune::test
