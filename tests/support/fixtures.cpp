#include "tests/support/fixtures.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <stdexcept>
#include <system_error>
#include <unistd.h>

namespace ptopt::test {

std::string fixturesDir() {
  const char* env = std::getenv("PTOPT_FIXTURES_DIR");
  return env ? env : PTOPT_FIXTURES_DIR;
}

std::string exportedDir() {
  const char* env = std::getenv("PTOPT_EXPORTED_DIR");
  return env ? env : PTOPT_EXPORTED_DIR;
}

bool Fixture::hasTag(const std::string& t) const {
  return std::find(tags.begin(), tags.end(), t) != tags.end();
}

const std::vector<Fixture>& allFixtures() {
  static const std::vector<Fixture> fixtures = [] {
    const std::string manifest = fixturesDir() + "/fixtures.json";
    std::ifstream in(manifest);
    if (!in) throw std::runtime_error("cannot read " + manifest + " (run the fixtures.generate test first)");
    nlohmann::json j;
    in >> j;
    std::vector<Fixture> out;
    for (const auto& f : j.at("fixtures")) {
      Fixture fx;
      fx.name = f.at("name");
      fx.path = fixturesDir() + "/" + f.at("file").get<std::string>();
      for (const auto& i : f.at("inputs")) fx.inputs.push_back(verify::inputSpecFromJson(i));
      fx.stochastic = f.value("stochastic", false);
      fx.tags = f.value("tags", std::vector<std::string>{});
      out.push_back(std::move(fx));
    }
    return out;
  }();
  return fixtures;
}

const Fixture& fixture(const std::string& name) {
  for (const auto& f : allFixtures())
    if (f.name == name) return f;
  throw std::runtime_error("no fixture named " + name);
}

c10::IValue runForward(torch::jit::Module& m, const std::vector<c10::IValue>& inputs, uint64_t seed) {
  torch::NoGradGuard noGrad;
  torch::manual_seed(seed);
  return m.forward(verify::cloneInputs(inputs));
}

ir::Model importFixture(const Fixture& f, torch::jit::Module* original) {
  torch::jit::Module m = ir::loadTorchScript(f.path);
  m.eval();
  if (original) *original = m;
  return ir::importModule(m);
}

namespace {

// The folders processTempDir made, removed when the process exits.
struct ProcessTempDirs {
  std::map<std::string, std::filesystem::path> byPrefix;
  ~ProcessTempDirs() {
    std::error_code ec;
    for (const auto& [prefix, path] : byPrefix) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

std::filesystem::path processTempDir(const std::string& prefix) {
  static ProcessTempDirs dirs;
  auto [it, added] = dirs.byPrefix.try_emplace(prefix);
  if (added) it->second = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
  std::filesystem::create_directories(it->second);
  return it->second;
}

}  // namespace ptopt::test
