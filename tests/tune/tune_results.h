// What the --tune tests read of a tuning result, and their cache files.
#pragma once

#include "rewriters/pass.h"
#include "tests/support/fixtures.h"
#include "tune/tune_model.h"
#include "verify/inputs.h"

#include <filesystem>
#include <string>

namespace ptopt::test {

// A context with `f`'s example inputs (seed 0): what --tune times with.
inline rewriters::PassContext exampleContext(const Fixture& f) {
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  return ctx;
}

// Options that time on `timer` (a test's fake), cache in `cache` ("" none) within `budget` seconds.
inline tune::TuneOptions timedOn(tune::Timer& timer, const std::string& cache, double budget) {
  tune::TuneOptions o;
  o.timer = &timer;
  o.cachePath = cache;
  o.budgetSeconds = budget;
  return o;
}

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
