// ir::AtomicModuleFile: the streamed, atomic write of a module. Committed:
// the file loads; not committed: nothing is left and an existing file keeps
// its bytes; a failed write (a file-size limit standing in for a full disk)
// throws a clean error (std::system_error) and leaves nothing behind; a
// signal that ends the process removes the temporary file too.
#include "ir/model.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace ptopt::ir;

namespace {

torch::jit::Module smallModule(int64_t elements) {
  torch::jit::Module m("Small");
  m.register_parameter("w", torch::randn({elements}), false);
  m.define("def forward(self, x):\n  return x * self.w\n");
  return m;
}

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("ptopt_atomic_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

size_t filesIn(const fs::path& dir) { return static_cast<size_t>(std::distance(fs::directory_iterator(dir), {})); }

}  // namespace

TEST_CASE("AtomicModuleFile writes, loads back and commits, the temporary file is gone") {
  const fs::path out = scratch("ok.pt");
  {
    AtomicModuleFile file(out.string());
    file.write(smallModule(1000));
    CHECK(fs::exists(file.tempPath()));
    CHECK_FALSE(fs::exists(out));
    CHECK(file.bytesWritten() == fs::file_size(file.tempPath()));
    torch::jit::Module back = file.load();
    CHECK(back.attr("w").toTensor().numel() == 1000);
    file.commit();
  }
  CHECK(fs::exists(out));
  CHECK(filesIn(out.parent_path()) == 1);
  CHECK(torch::jit::load(out.string()).attr("w").toTensor().numel() == 1000);
  fs::remove_all(out.parent_path());
}

TEST_CASE("AtomicModuleFile not committed leaves nothing and keeps the file it would replace") {
  const fs::path out = scratch("keep.pt");
  { std::ofstream(out) << "old bytes"; }
  {
    AtomicModuleFile file(out.string());
    file.write(smallModule(10));
  }  // e.g. verification failed
  CHECK(filesIn(out.parent_path()) == 1);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "old bytes");
  fs::remove_all(out.parent_path());
}

TEST_CASE("AtomicModuleFile: a write that fails (file-size limit) throws cleanly and leaves nothing") {
  const fs::path out = scratch("full.pt");
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto previous = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string message;
  try {
    AtomicModuleFile file(out.string());
    file.write(smallModule(1 << 20));  // 4 MB of weights
    file.commit();
  } catch (const std::system_error& e) {  // an I/O failure, not a model that does not serialize
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  CHECK_THAT(message, Catch::StartsWith("cannot write '" + out.string() + "'"));
  CHECK(filesIn(out.parent_path()) == 0);
  fs::remove_all(out.parent_path());
}

TEST_CASE("AtomicModuleFile: SIGTERM or Ctrl-C while the file waits for its check removes it") {
  for (int signo : {SIGTERM, SIGINT}) {
    const fs::path out = scratch("signal.pt");
    const torch::jit::Module module = smallModule(1000);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      std::signal(signo, SIG_DFL);  // as in the CLI (the test framework installs its own handler)
      AtomicModuleFile file(out.string());
      file.write(module);
      ::raise(signo);  // e.g. during a long verification
      ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signo);
    CHECK(filesIn(out.parent_path()) == 0);
    fs::remove_all(out.parent_path());
  }
}
