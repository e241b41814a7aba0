// Per-pass blame (--verify-each): after every pass execution that changed
// the model, the model as it is then is checked against the reference
// outputs computed once (ReferenceRunner), and the first execution that
// breaks tolerance is named: "rules (execution 2, method forward)". Later
// executions are not checked again once one is blamed.
#pragma once

#include "rewriters/pass_manager.h"
#include "verify/runner.h"

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace ptopt::verify {

struct Blame {
  std::string pass;  // "NAME (execution N, method M)"
  VerifyReport report;
  // "verify-each: pass 'NAME (...)' broke tolerance: VERDICT\n" and the
  // failing outputs' blocks.
  std::string message() const;
};

// Thrown to stop the pass manager at the blamed pass (from onPassEnd).
class BlameError : public std::runtime_error {
 public:
  explicit BlameError(Blame b) : std::runtime_error(b.pass), blame(std::move(b)) {}
  Blame blame;
};

class PassBlamer {
 public:
  // `current` exports the model as it is after a pass (called only after
  // executions that changed it).
  PassBlamer(const ReferenceRunner& runner, std::function<torch::jit::Module()> current)
      : runner_(runner), current_(std::move(current)) {}
  // The blame when `exec` is the first execution that breaks tolerance;
  // nullopt otherwise (unchanged, within tolerance, or one already blamed).
  std::optional<Blame> afterPass(const rewriters::PassExecution& exec);
  const std::optional<std::string>& blamed() const { return blamed_; }

 private:
  const ReferenceRunner& runner_;
  std::function<torch::jit::Module()> current_;
  std::optional<std::string> blamed_;
};

}  // namespace ptopt::verify
