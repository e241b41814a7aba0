// The pass registry: an explicit table filled by registerAllPasses() (no
// static registrars: a linker drops those from static libraries).
#pragma once

#include "ir/raise.h"
#include "rewriters/pass.h"
#include "rewriters/side_data.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ptopt::rewriters {

using PassFactory = std::function<std::unique_ptr<Pass>()>;

struct PassInfo {
  std::string name, description, contract;
  std::vector<OptionSpec> options;
  PassFactory create;
};

class PassRegistry {
 public:
  // Registers a pass (its metadata is read from one instance).
  void add(PassFactory factory);
  const PassInfo* find(const std::string& name) const;
  std::vector<const PassInfo*> all() const;  // sorted by name
  // A pass configured with `options` (validated). Throws std::invalid_argument.
  std::unique_ptr<Pass> create(const std::string& name,
                               const std::map<std::string, std::string>& options = {}) const;
  // The registered name closest to `name` (edit distance), or "" if none is close.
  std::string suggest(const std::string& name) const;

  // A lowering's inverse, run by import on models ptopt wrote (ir/raise.h),
  // registered next to the lowering's pass; steps run in registration order.
  void addRaiseStep(ir::RaiseStep step) { raiseSteps_.push_back(std::move(step)); }
  const std::vector<ir::RaiseStep>& raiseSteps() const { return raiseSteps_; }

  // What higher layers register next to a pass, keyed by type, that this
  // layer does not know: the tunables of --tune (tune/tunable.h).
  SideData& extensions() { return extensions_; }
  const SideData& extensions() const { return extensions_; }

 private:
  std::map<std::string, PassInfo> passes_;
  std::vector<ir::RaiseStep> raiseSteps_;
  SideData extensions_;
};

// The generic passes of rewriters/ (dce, cse, const-fold, canonicalize,
// shape-prop, functionalize, rules).
void registerGenericPasses(PassRegistry& registry);

size_t editDistance(const std::string& a, const std::string& b);

}  // namespace ptopt::rewriters
