// The ptopt C++ API: load a model, build or parse a pipeline, run it, verify,
// save. Installed with `cmake --install`; use it with find_package(ptopt) and
// target_link_libraries(app PRIVATE ptopt::api).
//
//   ptopt::Optimizer opt = ptopt::Optimizer::load("in.pt");
//   opt.run("canonicalize,fixpoint{max-iter=3}(cse,dce)");
//   auto v = opt.verify({"1,3,224,224"});   // compares with the original
//   if (v.passed) opt.save("out.pt");
//
// `ptopt IN OUT` and the Python package run through the same class, in the
// stages of driver/stages.h: load (timed), run, then reference() /
// referenceRunner() for the module and outputs the result is compared with,
// exportModule() handed to the front end (the CLI streams it into OUT's
// temporary file, ir::AtomicModuleFile; Python keeps the bytes) and loaded
// back from those bytes, and cpuStandIn() for what a CPU can verify of a
// model it cannot run. Other in-memory callers (the never-slower stage's
// fallback candidates, driver/measure.cpp; tests) use serialize() for the
// bytes and the module loaded back from them, and save(Serialized, path).
#pragma once

#include "ir/model.h"
#include "ir/model_format.h"
#include "ir/pt2.h"
#include "ir/training_mode.h"
#include "rewriters/pass_manager.h"
#include "rewriters/registry.h"
#include "api/load_ops.h"  // ptopt::loadOperatorLibrary: call it before load() for custom operators
#include "verify/compare.h"
#include "verify/inputs.h"
#include "verify/runner.h"

#include <optional>
#include <string>
#include <vector>

namespace ptopt {

// Registers every pass of every folder (the one explicit table).
void registerAllPasses(rewriters::PassRegistry& registry);
// A registry with every pass, built once.
const rewriters::PassRegistry& defaultRegistry();

// ir::importModule with the default registry's raise steps when `options`
// names none: a model ptopt wrote comes back in the dense ops every pass
// reads (ir/raise.h). Every front end imports through this.
ir::Model importModel(const torch::jit::Module& module, ir::ImportOptions options = {});

// Parses pipeline text, or a preset name "-O0".."-O3" alone or followed by
// more passes ("-O1,channels-last": they run before the preset's closing
// fuse-cudnn; rewriters::addExtraPasses).
rewriters::Pipeline parsePipelineOrPreset(const std::string& textOrPreset);

struct VerifyResult {
  bool passed = false;
  bool bitwiseEqual = false;
  std::string summary;  // per output, per iteration that failed
};

class Optimizer {
 public:
  // Milliseconds load() spent reading the file (LibTorch) and importing it.
  struct LoadTimes {
    double readMs = 0, importMs = 0;
  };
  // A TorchScript file or a torch.export .pt2 (told by its contents).
  static Optimizer load(const std::string& path, const ir::ImportOptions& options = {},
                        LoadTimes* times = nullptr);
  // A program read from a .pt2 (ir::readPt2): its original, the one verified
  // against and timed, is the program as read, rendered as TorchScript.
  static Optimizer fromPt2(ir::Pt2ReadResult program);
  // A fresh import of original() (what the model was before any pass),
  // keeping what a .pt2 said besides its graph.
  Optimizer freshCopy(const ir::ImportOptions& options) const;
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

  // The current IR as a TorchScript module, and saved atomically in the
  // format `path` names (`.pt2`: a torch.export program, whose tensors'
  // metadata come from one run on `exampleInputs`, or on inputs of the
  // recorded shapes when none are given).
  torch::jit::Module exportModule() const;
  void save(const std::string& path, const std::vector<c10::IValue>& exampleInputs = {}) const;

  // ---- Verifying the result of a known pipeline (what `ptopt IN OUT` does).

  // The module a run of `pipeline` is verified against: the original in
  // eval mode; for a model traced in training mode whose pipeline
  // specializes the training flags tracing baked in (remove-dropout,
  // bn-inference), the import with only those two passes applied: the same
  // weights in eval semantics. A copy when `device` is not the CPU (the
  // runner moves it there).
  struct Reference {
    torch::jit::Module module;
    bool specializesTracedFlags = false;  // the second case
  };
  Reference reference(const rewriters::Pipeline& pipeline, c10::Device device) const;
  // Runs `reference` on every input set once and keeps the outputs, to
  // check many candidates (each pass with --verify-each, then the result).
  // Throws verify::ReferenceError naming the model's inputs when the
  // reference fails on them.
  verify::ReferenceRunner referenceRunner(const Reference& reference, const verify::InputSource& inputs,
                                          const verify::ToleranceSet& tol, c10::Device device) const;
  // What a check on `device` runs in place of the model run(pipeline, ctx)
  // made, when the device cannot run that model: a stand-in, the same
  // pipeline on a fresh import of the original with the casts emulated
  // (fp16 rounding, fp32 compute: LibTorch has no fp16 convolutions on a
  // CPU) and without the CUDA-only fusions (fuse-cudnn: exact rewrites to
  // cuDNN kernels). `notes` say so. nullopt when the model itself can be
  // checked there.
  struct StandIn {
    torch::jit::Module module;
    std::vector<std::string> notes;
  };
  std::optional<StandIn> cpuStandIn(const rewriters::Pipeline& pipeline, const rewriters::PassContext& ctx,
                                    const rewriters::RunReport& report, c10::Device device) const;

  // The current IR exported and serialized, and the module loaded back from
  // exactly those bytes: what save(Serialized, path) writes, and what to
  // verify (an in-memory export shares class types with the original and
  // may behave differently from a fresh load: objects, defaults). Throws
  // when the model does not serialize or load back.
  struct Serialized {
    torch::jit::Module module;
    std::string bytes;
    double exportMs = 0, serializeMs = 0;  // serializeMs: serializing and loading back
  };
  Serialized serialize() const;
  // The same in `format`: for a .pt2, the module runs the bytes read back
  // (ir::runnableFromBytes). `exampleInputs` as for save().
  Serialized serialize(ir::ModelFormat format, const std::vector<c10::IValue>& exampleInputs) const;
  // The bytes alone, for callers that keep or stream them before loading back.
  // A .pt2 written from a TorchScript model's graph is specialized to the
  // inputs first (ir/pt2.h); `notes` gets one line per branch resolved.
  std::string serializedBytes(ir::ModelFormat format, const std::vector<c10::IValue>& exampleInputs,
                              std::vector<std::string>* notes = nullptr) const;
  // Writes `s.bytes` to `path` atomically (a temporary file in its folder,
  // then a rename); not loaded back again.
  static void save(const Serialized& s, const std::string& path);

  ir::Model& model() { return model_; }
  const ir::Model& model() const { return model_; }
  torch::jit::Module& original() { return original_; }
  const torch::jit::Module& original() const { return original_; }
  // How the loaded model relates to training mode (ir/training_mode.h), as
  // loaded: passes that specialize training flags do not change it.
  const ir::TrainingMode& trainingMode() const { return trainingMode_; }
  // The format the model was read in, and what a .pt2 said besides its
  // graph (its calling convention, which constants are parameters).
  ir::ModelFormat inputFormat() const { return pt2_ ? ir::ModelFormat::Pt2 : ir::ModelFormat::TorchScript; }
  const ir::Pt2Program* pt2Program() const { return pt2_ ? &*pt2_ : nullptr; }

 private:
  Optimizer(torch::jit::Module original, ir::Model model, ir::TrainingMode mode, ir::ImportOptions options)
      : original_(std::move(original)), model_(std::move(model)), trainingMode_(mode),
        importOptions_(std::move(options)) {}
  torch::jit::Module original_;
  ir::Model model_;
  ir::TrainingMode trainingMode_;
  ir::ImportOptions importOptions_;  // for stand-ins: a fresh import the same way
  std::optional<ir::Pt2Program> pt2_;  // read from a .pt2
};

}  // namespace ptopt
