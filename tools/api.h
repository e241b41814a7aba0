// The ptopt C++ API: load a model, build or parse a pipeline, run it, verify,
// save. Installed with `cmake --install`; use it with find_package(ptopt) and
// target_link_libraries(app PRIVATE ptopt::api).
//
//   ptopt::Optimizer opt = ptopt::Optimizer::load("in.pt");
//   opt.run("canonicalize,fixpoint{max-iter=3}(cse,dce)");
//   auto v = opt.verify({"1,3,224,224"});   // compares with the original
//   if (v.passed) opt.save("out.pt");
#pragma once

#include "ir/model.h"
#include "ir/training_mode.h"
#include "rewriters/pass_manager.h"
#include "rewriters/registry.h"
#include "tools/load_ops.h"  // ptopt::loadOperatorLibrary: call it before load() for custom operators
#include "verify/compare.h"
#include "verify/inputs.h"
#include "verify/runner.h"

#include <string>
#include <vector>

namespace ptopt {

// Registers every pass of every folder (the one explicit table).
void registerAllPasses(rewriters::PassRegistry& registry);
// A registry with every pass, built once.
const rewriters::PassRegistry& defaultRegistry();

// Parses pipeline text, or a preset name "-O0".."-O3".
rewriters::Pipeline parsePipelineOrPreset(const std::string& textOrPreset);

struct VerifyResult {
  bool passed = false;
  bool bitwiseEqual = false;
  std::string summary;  // per output, per iteration that failed
};

class Optimizer {
 public:
  static Optimizer load(const std::string& path, const ir::ImportOptions& options = {});
  // Imports an already loaded module (put in eval mode: trainingMode() says
  // whether that, or training flags baked in by tracing, change anything).
  static Optimizer fromModule(torch::jit::Module module, const ir::ImportOptions& options = {});

  // Runs a pipeline (text or preset) on every method.
  rewriters::RunReport run(const std::string& pipelineOrPreset, rewriters::PassContext* ctx = nullptr,
                           const rewriters::Instrumentation& inst = {});
  rewriters::RunReport run(const rewriters::Pipeline& pipeline, rewriters::PassContext* ctx = nullptr,
                           const rewriters::Instrumentation& inst = {});

  // Exports the current IR and compares it with the original on seeded
  // inputs (`iterations` seeds starting at `seed`). Inputs left out take
  // their defaults (verify::completeInputSpecs; std::invalid_argument when a
  // required one is missing).
  VerifyResult verify(const std::vector<verify::InputSpec>& inputs, const verify::Tolerance& tol = {},
                      int iterations = 3, uint64_t seed = 0);
  VerifyResult verify(const std::vector<std::string>& inputShapes, const verify::Tolerance& tol = {},
                      int iterations = 3, uint64_t seed = 0);
  // The full report (per-output metrics) on a device ("auto", "cpu", "cuda").
  verify::VerifyReport verify(const verify::InputSource& inputs, const verify::ToleranceSet& tol,
                              const std::string& device = "auto");

  // The current IR as a TorchScript module, and saved atomically.
  torch::jit::Module exportModule() const;
  void save(const std::string& path) const;

  ir::Model& model() { return model_; }
  torch::jit::Module& original() { return original_; }
  // How the loaded model relates to training mode (ir/training_mode.h), as
  // loaded: passes that specialize training flags do not change it.
  const ir::TrainingMode& trainingMode() const { return trainingMode_; }

 private:
  Optimizer(torch::jit::Module original, ir::Model model, ir::TrainingMode mode)
      : original_(std::move(original)), model_(std::move(model)), trainingMode_(mode) {}
  torch::jit::Module original_;
  ir::Model model_;
  ir::TrainingMode trainingMode_;
};

}  // namespace ptopt
