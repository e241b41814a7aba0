// What the --tune tests read of a tuning result, and their cache files.
#pragma once

#include "tests/support/fixtures.h"
#include "tune/tune_model.h"

#include <filesystem>
#include <string>

namespace ptopt::test {

// The whole-model decision of `kind` (node "model"), if any.
inline const tune::DecisionRecord* wholeModelDecision(const tune::TuneResult& r, const std::string& kind) {
  for (const auto& d : r.decisions)
    if (d.kind == kind && d.node == "model") return &d;
  return nullptr;
}

// A tuning-cache path `name` in this process's temporary folder `prefix`, no file there yet.
inline std::string freshTuningCache(const std::string& prefix, const std::string& name) {
  const std::filesystem::path p = processTempDir(prefix) / name;
  std::filesystem::remove(p);
  return p.string();
}

}  // namespace ptopt::test
