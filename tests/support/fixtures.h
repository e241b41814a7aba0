// Test access to the generated fixtures (tests/fixtures/make_fixtures.py).
#pragma once

#include "ir/model.h"
#include "verify/inputs.h"

#include <filesystem>
#include <string>
#include <vector>

namespace ptopt::test {

struct Fixture {
  std::string name;
  std::string path;
  std::vector<verify::InputSpec> inputs;
  bool stochastic = false;
  std::vector<std::string> tags;
  bool hasTag(const std::string& t) const;
};

const std::vector<Fixture>& allFixtures();
const Fixture& fixture(const std::string& name);
std::string fixturesDir();
std::string exportedDir();

// A folder of the system's temporary directory named PREFIX and this
// process's id, made on the first call and removed with what it holds when
// the process exits (a test executable runs a whole test file's cases).
std::filesystem::path processTempDir(const std::string& prefix);

// Runs `m.forward` on a copy of `inputs`; stochastic models get the global
// RNG re-seeded first so two runs see the same dropout masks.
c10::IValue runForward(torch::jit::Module& m, const std::vector<c10::IValue>& inputs, uint64_t seed = 7);

// Imports a fixture; the module is returned through `original` (eval mode).
ir::Model importFixture(const Fixture& f, torch::jit::Module* original = nullptr);

}  // namespace ptopt::test
