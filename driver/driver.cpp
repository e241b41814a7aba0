#include "driver/driver.h"

#include "driver/measure_cache.h"
#include "driver/op_table.h"
#include "driver/stages.h"
#include "driver/util.h"

#include "ir/model.h"
#include "quant/quantize.h"
#include "rewriters/rules.h"
#include "target/capabilities.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>
#include <unistd.h>

namespace ptopt::driver {

VerificationFailed::VerificationFailed(verify::VerifyReport r)
    : std::runtime_error(r.verdict() + "\n" + r.failureReport()), report(std::move(r)) {}

std::string Outcome::verdict() const {
  if (!record.verification) return "skipped (" + record.verificationSkipped + ")";
  std::string v = record.verification->verdict();
  if (!record.verification->passed) v += "\n" + record.verification->failureReport();
  return v;
}

// ---- plan

namespace {
// How the pipeline and messages name the request's i-th rule text.
std::string ruleTextName(const Request& req, size_t i) {
  // lint: not a pass (Python's rules= argument, as messages name its text)
  return req.ruleTexts.size() == 1 ? "rules" : fmt::format("rules[{}]", i);  // lint: not a pass
}
}  // namespace

rewriters::Pipeline planPipeline(const Request& req) {
  rewriters::Pipeline p = req.pipelineSource.empty()
                              ? rewriters::parsePipelineOrPreset(req.pipeline, defaultRegistry())
                              : rewriters::parsePipeline(req.pipeline, defaultRegistry(), req.pipelineSource);
  std::vector<rewriters::PipelineElement> rules;
  for (const auto& file : req.ruleFiles) {
    std::ifstream probe(file);
    if (!probe) throw RequestError("cannot read rule file '" + file + "' (check the path and its permissions)");
    rules.push_back(rewriters::rulesElement(file));
  }
  for (size_t i = 0; i < req.ruleTexts.size(); ++i) {
    const std::string name = ruleTextName(req, i);
    rewriters::parseRules(req.ruleTexts[i], name);  // errors now, naming the text
    rules.push_back(rewriters::ruleTextElement(name));
  }
  rewriters::addExtraPasses(p, rules);
  // Like the extra passes: after the rewrites and the rules, before the device lowering.
  if (!req.quantize.empty()) quant::addRequestedPrecision(p, req.quantize, defaultRegistry());
  return p;
}

namespace {

// OUT must be writable and must not clobber anything unasked.
void checkOutputPath(const Request& req) {
  namespace fs = std::filesystem;
  const std::string& out = req.output;
  std::error_code ec;
  const bool exists = fs::exists(out, ec);
  if (exists && fs::is_directory(out, ec))
    throw RequestError("OUT '" + out + "' is a directory; give a file name such as " + out + "/model.opt.pt");
  if (exists && !req.input.empty() && sameFile(req.input, out)) {
    if (!req.inPlace)
      throw RequestError("OUT '" + out + "' is the input file itself; choose another output path (or pass --in-place)");
  } else if (req.inPlace) {
    throw RequestError("--in-place: OUT '" + out + "' is not the input file");
  } else if (exists && !req.overwrite) {
    throw RequestError("'" + out + "' exists; pass --overwrite to replace it");
  }
  const fs::path dir = fs::path(out).has_parent_path() ? fs::path(out).parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw RequestError("the folder of OUT, '" + dir.string() + "', does not exist; create it first");
  if (::access(dir.c_str(), W_OK) != 0)
    throw RequestError("cannot write into '" + dir.string() + "' (permission denied); choose another output folder");
}

// The bytes of a file, as a candidate to write unchanged.
std::string readBytes(const std::string& path) {
  try {
    return ir::readFileBytes(path);
  } catch (const ir::InputError& e) {
    throw std::runtime_error(e.what());
  }
}

// One run: the settings every stage reads, each stage's result as it
// comes, and where the bytes go.
class Run {
 public:
  Run(const Request& req, const FrontEnd& fe) : req_(req), fe_(fe) {}

  Outcome go(std::optional<Optimizer> given) {
    plan();
    // The untimed work at the request's count; --tune and the measure stage
    // at LibTorch's own (request.h workThreads).
    std::optional<ScopedThreads> work;
    auto untimed = [this, &work](bool on) {
      if (on && req_.workThreads > 0) work.emplace(req_.workThreads);
      if (!on) work.reset();
    };
    if (req_.workThreads > 0)
      record_.sections["threads"] = {{"untimed_work", req_.workThreads}, {"libtorch", at::get_num_threads()}};
    untimed(true);
    load(std::move(given));
    reference();
    if (req_.tune) {
      untimed(false);
      tune();
      untimed(true);
    }
    if (!passes()) return finish();
    exportResult();
    const bool ok = verifyStage(set_, *ref_, *exported_, record_);
    if (!ok && record_.verification) out_.passed = false;
    untimed(false);
    measured_ = measureStage({set_, opt_ ? &*opt_ : nullptr, pipeline_, *ref_, run_, *exported_, before_}, ok, record_);
    if (measured_.counts) {
      record_.opsAfter = measured_.counts->ops;
      record_.parameterBytesAfter = measured_.counts->parameterBytes;
    }
    save(ok);
    return finish();
  }

 private:
  // plan: the pipeline, OUT's path, the device, the stages' settings.
  void plan() {
    pipeline_ = planPipeline(req_);
    record_.pipeline = rewriters::printPipeline(pipeline_);
    if (!req_.output.empty()) checkOutputPath(req_);
    set_.req = &req_;
    try {
      target::assumedIsa(req_.assumeIsa);  // a level this run can assume (the passes read it from the context)
      set_.device = verify::resolveDevice(req_.device);
    } catch (const std::invalid_argument& e) {
      throw RequestError(e.what());
    }
    record_.input = req_.input;
    record_.output = req_.output;
    record_.device = verify::describeDevice(set_.device);
    set_.measureOptions.budgetSeconds = req_.measureBudgetSeconds;
    // --tune has spent its own budget timing candidates; the verdict on its
    // result times the pairs a verdict needs even past the measure budget,
    // so that a slow model (a transformer of 300 ms a call) gets one.
    set_.measureOptions.hardBudget = !req_.tune;
    set_.measureOptions.threads = req_.measureThreads > 0                       ? req_.measureThreads
                                  : req_.tune && !req_.tuneThreads.empty() ? req_.tuneThreads.front()
                                                                           : 1;
    set_.measureOptions.optimizingExecutor = req_.inputs.executor == "optimizing";
    set_.explain = req_.explain ? fe_.out : nullptr;
    set_.tuneProgress = fe_.tuneProgress;
    set_.noMeasureName = fe_.noMeasureName;
    set_.hooks.say = fe_.say;
    set_.hooks.note = fe_.note;
    set_.hooks.notice = fe_.notice;
    set_.hooks.warning = fe_.warning;
    storeBytes();
  }

  // Where OUT's bytes go: OUT's temporary file (streamed, then loaded back
  // from it), or memory.
  void storeBytes() {
    StageHooks& h = set_.hooks;
    if (!req_.output.empty()) {
      h.write = [this](const ExportedModel& exported) {
        file_ = std::make_unique<ir::AtomicModuleFile>(req_.output);
        if (exported.format == ir::ModelFormat::TorchScript) file_->write(exported.module);
        else file_->write(exported.bytes);
      };
      h.loadBack = [this] {
        if (set_.outputFormat == ir::ModelFormat::TorchScript) return file_->load();
        return ir::runnableFromBytes(set_.outputFormat, readBytes(file_->tempPath()), req_.output);
      };
      h.outputDigest = [this] { return fileDigest(file_->tempPath()); };
    } else {
      h.write = [this](const ExportedModel& exported) {
        out_.serialized.bytes =
            exported.format == ir::ModelFormat::TorchScript ? ir::serializeModule(exported.module) : exported.bytes;
      };
      h.loadBack = [this] {
        out_.serialized.module = ir::runnableFromBytes(set_.outputFormat, out_.serialized.bytes, "the optimized model");
        return out_.serialized.module;
      };
      h.outputDigest = [this] { return bytesDigest(out_.serialized.bytes); };
    }
    h.inputDigest = [this] {
      return req_.input.empty() ? bytesDigest(ir::serializeModule(opt_->original())) : fileDigest(req_.input);
    };
    h.inputAsOutput = [this] {
      Optimizer::Serialized s;
      if (set_.outputFormat != opt_->inputFormat())  // IN as it was, in OUT's format
        return opt_->freshCopy(req_.importOptions).serialize(set_.outputFormat, set_.exampleInputs);
      if (!req_.input.empty()) {
        s.bytes = readBytes(req_.input);
        s.module = opt_->original();
      } else {
        s.bytes = ir::serializeModule(opt_->original());
        s.module = ir::loadSerializedModule(s.bytes);
      }
      return s;
    };
  }

  // load: IN (unless the front end handed the model over), the counts
  // before; a model in training mode is refused with keepTraining.
  void load(std::optional<Optimizer> given) {
    if (!ir::pt2Supported() && ir::formatForOutput(req_.output, req_.to, ir::ModelFormat::TorchScript) ==
                                   ir::ModelFormat::Pt2)
      throw RequestError("OUT '" + req_.output + "' is a .pt2: " + ir::pt2UnsupportedMessage("write"));
    Optimizer::LoadTimes times;
    if (given) {
      opt_.emplace(std::move(*given));
    } else {
      opt_.emplace(Optimizer::load(req_.input, req_.importOptions, &times));
      record_.stageMs["load"] = times.readMs;
      record_.inputFileBytes = std::filesystem::file_size(req_.input);
      record_.stageMs["import"] = times.importMs;
    }
    before_ = countModel(opt_->model());
    record_.opsBefore = before_.ops;
    record_.parameterBytesBefore = before_.parameterBytes;
    if (!given)
      set_.say(fmt::format("loaded {}{}: {} nodes, {} constants ({:.0f} ms)\n", req_.input,
                           opt_->inputFormat() == ir::ModelFormat::Pt2 ? " (torch.export program)" : "",
                           before_.nodes, opt_->model().constants->size(), times.readMs + times.importMs));
    set_.outputFormat = ir::formatForOutput(req_.output, req_.to, opt_->inputFormat());
    const ir::TrainingMode& mode = opt_->trainingMode();
    if (mode.inTraining() && req_.keepTraining)
      throw ir::InputError(fmt::format(
          "{} is in training mode ({}), and keep-training refuses to optimize it for inference; save it after "
          "model.eval() (or trace it in eval mode), or drop keep-training to optimize it in eval semantics",
          req_.input.empty() ? "the model" : req_.input,
          mode.scriptedInTraining ? "scripted and saved with training=True" : "traced in training mode"));
  }

  // reference: the shared stage, then the verification inputs by the
  // request's policy (driver/request.h) and the reference's outputs on
  // them, computed once.
  // A program exported with dynamic sizes is verified at other sizes within
  // its ranges too (every symbol moved), not only at the ones it was
  // exported at: a rewrite that fixed a size would pass there alone.
  void checkOtherSizes(verify::InputPlan& inputs) const {
    const ir::Pt2Program* program = opt_->pt2Program();
    if (!inputs.source || inputs.source->fixed || !program || !program->shapes.dynamic()) return;
    verify::InputSource& source = *inputs.source;
    std::vector<std::vector<int64_t>> given;
    for (const auto& spec : source.specs) given.push_back(spec.shape);
    source.addOtherSizes(program->shapes.otherInputSizes(given));
  }

  void reference() {
    ref_.emplace(referenceStage(set_, *opt_, pipeline_, record_));
    // Rule texts reach the rules pass on the context (rules{text=NAME}).
    if (!req_.ruleTexts.empty()) {
      rewriters::RuleTexts texts;
      for (size_t i = 0; i < req_.ruleTexts.size(); ++i) texts.byName[ruleTextName(req_, i)] = req_.ruleTexts[i];
      ref_->ctx.inputs.set(std::move(texts));
    }
    const ToleranceOverrides& t = req_.tolerances;
    if ((t.scaleTol || !t.scaleTolFor.empty()) && ref_->tolerances.base.criterion == verify::Criterion::Global)
      set_.warning("scale-tol applies to fp32 results only; this pipeline's low-precision results are checked by the "
                 "global criterion (cosine and max|a-b| <= atol + rtol*max|b|)");
    verify::InputPlan inputs = verify::planInputs(req_.inputs, opt_->model().forward());
    checkOtherSizes(inputs);
    calibrate(inputs);
    if (inputs.source) set_.exampleInputs = inputs.source->inputsFor(0);
    out_.inputsInferred = inputs.inferred;
    const Verification policy = req_.verification;
    if (!inputs.source) {
      record_.verificationSkipped = inputs.message;
      if (policy == Verification::Required)
        throw RequestError(inputs.message + (fe_.verifyRequiredHint.empty() ? "" : " (" + fe_.verifyRequiredHint + ")"));
      if (policy == Verification::WhenPossible) set_.warning(inputs.message);
    } else if (policy != Verification::Off && inputs.inferred) {
      set_.note(inputs.message);
    }
    try {
      referenceOutputs(set_, *opt_, *ref_, inputs, record_);
    } catch (const verify::ReferenceError& e) {
      if (!inputs.inferred) throw InputsDoNotFit(e.what());
      if (policy == Verification::Required)
        throw InputsDoNotFit(std::string(e.what()) + "\n(the input shape was assumed: " + inputs.message +
                             "; give the inputs to verify with)");
      // An assumption that does not fit is not the user's error.
      record_.verificationSkipped =
          "the assumed input shape does not fit the model; " + fe_.inputsHint + " to verify";
      if (policy == Verification::WhenPossible) set_.warning("verification skipped: " + record_.verificationSkipped);
      ref_->runner.reset();
    }
    if (policy == Verification::Off) record_.verificationSkipped = fe_.noVerifyName;
  }

  // calibrate: the batches from the request's file or memory, checked and
  // handed to the passes (driver/stages.h calibrationStage).
  void calibrate(verify::InputPlan& inputs) {
    if (!req_.calibrationFile.empty()) {
      verify::InputSet set;
      try {
        set = verify::loadInputsFile(req_.calibrationFile);
      } catch (const std::invalid_argument& e) {
        throw ir::InputError(std::string("--calibration: ") + e.what());
      }
      calibrationStage(set_, *opt_, ref_->ctx, set.values, req_.calibrationFile, "--calibration", inputs);
    } else if (!req_.calibration.empty()) {
      calibrationStage(set_, *opt_, ref_->ctx, req_.calibration, req_.calibrationName, "calibration", inputs);
    }
  }

  void tune() {
    try {
      tune::TuneResult tuned = tuneStage(set_, *opt_, pipeline_, *ref_, record_);
      pipeline_ = tuned.pipeline;
      out_.tuneSummary = tuned.summary();
    } catch (const std::invalid_argument& e) {  // no input shapes to time with
      throw RequestError(e.what());
    }
  }

  // run: the pipeline with the request's instruments and the front end's;
  // false when verify-each stopped at a pass that breaks tolerance (and the
  // request does not force).
  bool passes() {
    std::optional<verify::PassBlamer> blamer;
    if (req_.verifyEach && ref_->verifying(req_))
      blamer.emplace(*ref_->runner, [this] { return opt_->exportModule(); });
    rewriters::Instrumentation inst;
    inst.printAfterAll = req_.printAfterAll;
    inst.printChanged = req_.printChanged;
    inst.wantChanges = static_cast<bool>(fe_.afterPass);
    inst.verifyEach = req_.verifyEach;
    inst.checkEditLog = req_.verifyEach;
    inst.bisectLimit = req_.bisectLimit;
    inst.out = fe_.out;
    inst.onPassStart = fe_.onPassStart;
    if (blamer || fe_.afterPass)
      inst.onPassEnd = [this, &blamer](const rewriters::PassExecution& e, const ir::Graph& g) {
        if (fe_.afterPass) fe_.afterPass(e, g);
        if (!blamer) return;
        std::optional<verify::Blame> blame = blamer->afterPass(e);
        if (!blame) return;
        record_.blamedPass = blame->pass;
        if (fe_.onPassesEnd) fe_.onPassesEnd();
        if (fe_.blamed) fe_.blamed(*blame);
        if (!req_.force) throw verify::BlameError(std::move(*blame));
      };
    if (fe_.beforePasses) fe_.beforePasses(opt_->model().forward());
    try {
      run_ = runStage(set_, *opt_, pipeline_, *ref_, record_, inst);
    } catch (const verify::BlameError& blame) {
      if (fe_.onPassesEnd) fe_.onPassesEnd();
      record_.verification = blame.blame.report;
      out_.blame = blame.blame;
      out_.passed = false;
      record_.outcome = "failed";
      return false;
    }
    if (fe_.onPassesEnd) fe_.onPassesEnd();
    if (fe_.afterPasses) set_.say(fe_.afterPasses(opt_->model().forward()));
    return true;
  }

  // export: streamed into OUT's temporary file or kept in memory (a failed
  // write is a WriteError).
  void exportResult() {
    try {
      exported_.emplace(exportStage(set_, opt_, pipeline_, *ref_, run_, record_));
    } catch (const std::system_error& e) {
      throw WriteError(e.what());
    }
    if (exported_->counts.nodes > 20000)
      set_.note(fmt::format("{} nodes in one graph: LibTorch's executor recurses about once per node on a graph's "
                          "first run, which can overflow a default 8 MiB stack (ptopt runs on a 1 GiB one). Run the "
                          "model on a thread with a larger stack (Python: threading.stack_size(1 << 30)) or raise "
                          "`ulimit -s`.",
                          exported_->counts.nodes));
  }

  // save: a result that failed verification is not kept unless forced; the
  // temporary file (or the faster candidate) becomes OUT.
  void save(bool ok) {
    if (!ok && !req_.force) {
      record_.outcome = "failed";
      return;  // nothing written: the temporary file goes with file_
    }
    if (!ok) set_.notice("verification FAILED; the result is kept anyway (force)");
    Stopwatch sw;
    if (!req_.output.empty()) {
      try {
        if (measured_.replacement) {
          file_.reset();  // the slower OUT's temporary file is removed
          Optimizer::save(*measured_.replacement, req_.output);
        } else {
          file_->commit();
        }
      } catch (const std::exception& e) {
        throw WriteError(e.what());
      }
      record_.outputFileBytes = std::filesystem::file_size(req_.output);
    } else {
      if (measured_.replacement) out_.serialized = std::move(*measured_.replacement);
      record_.outputFileBytes = out_.serialized.bytes.size();
    }
    record_.stageMs["save"] += sw.ms();
    out_.saved = true;
    record_.outcome = !ok                        ? "written despite failure (force)"
                      : measured_.written.empty() ? "passed"
                                                  : "passed; wrote " + measured_.written +
                                                        " (the optimized model was slower)";
  }

  Outcome finish() {
    out_.written = measured_.written;
    out_.format = set_.outputFormat;
    out_.nodesBefore = before_.nodes;
    out_.nodesAfter = measured_.counts ? measured_.counts->nodes : exported_ ? exported_->counts.nodes : 0;
    out_.record = std::move(record_);
    return std::move(out_);
  }

  const Request& req_;
  const FrontEnd& fe_;
  RunSettings set_;                // what every stage reads
  RunRecord record_;               // the --report record the stages write into
  rewriters::Pipeline pipeline_;   // planned; the tune stage's replaces it
  std::optional<Optimizer> opt_;   // IN, loaded; the export stage empties or lets it go
  ModelCounts before_;             // load
  std::optional<ReferenceResult> ref_;     // reference (calibration adds to its context)
  RunResult run_;                          // run
  std::optional<ExportResult> exported_;   // export
  MeasureOutcome measured_;                // measure
  Outcome out_;
  std::unique_ptr<ir::AtomicModuleFile> file_;  // export: OUT's temporary file
};

}  // namespace

Outcome optimize(const Request& request, const FrontEnd& frontEnd) {
  if (request.input.empty()) throw RequestError("no model: give IN (a TorchScript file)");
  return Run(request, frontEnd).go(std::nullopt);
}

Outcome optimize(Optimizer model, const Request& request, const FrontEnd& frontEnd) {
  return Run(request, frontEnd).go(std::move(model));
}

}  // namespace ptopt::driver
