// `ptopt IN.pt OUT.pt`: load, import, run the pipeline, export, verify, save.
//
// runOptimize runs the stages below in order, so that bad input fails before
// anything slow happens and nothing is written unless everything succeeded:
//   plan       the pipeline and the paths are checked (exit 2);
//   load       the model is loaded and imported (exit 2 for files that are
//              not TorchScript);
//   reference  verification inputs are planned and the reference runs on
//              them once (a shape that does not fit is exit 2, naming the
//              inputs);
//   run        the passes run (with --verify-each each changing pass is
//              checked against the cached reference outputs and the first
//              one that breaks tolerance is named: exit 3);
//   export     the result is exported and streamed into a temporary file
//              next to OUT (ir::AtomicModuleFile), then loaded back from
//              it, after letting go of what nothing needs any more (the IR;
//              the original too unless the measure stage times it or a
//              stand-in is checked), so the weights are not held twice;
//   verify     that module is checked (exit 3 on failure, the temporary
//              file removed: nothing written unless --force);
//   measure    it is timed against IN (tools/measure.h); when it is
//              measurably slower, the first verified candidate that is not
//              (the pipeline without its precision and layout passes, then
//              IN itself) is written instead, unless --force (--no-measure
//              skips this); with --tune, the verdict an earlier run measured
//              for the same IN and OUT bytes comes from the tuning cache
//              (tools/measure_cache.h);
//   save       the temporary file (or the candidate) becomes OUT, and the
//              summary is printed.
// The model work goes through the library's Optimizer (tools/api.h); these
// stages add the command line's messages, timings and the --report record.
#include "tools/api.h"
#include "tools/commands.h"
#include "tools/dot_dir.h"
#include "tools/measure.h"
#include "tools/measure_cache.h"
#include "tools/op_table.h"
#include "tools/report.h"
#include "tools/tune_stage.h"
#include "tools/util.h"
#include "tools/verify_setup.h"

#include "ir/model.h"
#include "quant/calibration.h"
#include "quant/precision_check.h"
#include "quant/quantize_report.h"
#include "target/capabilities.h"
#include "tune/cache.h"
#include "verify/blame.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/cuda.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <cstdlib>
#include <sstream>
#include <system_error>
#include <unistd.h>

namespace ptopt::tools {

void registerOptimizeOptions(CLI::App& app, OptimizeOptions& o) {
  app.add_option("input", o.input, "TorchScript model to optimize (never modified)");
  app.add_option("output", o.output, "Where to write the optimized model");
  app.add_option("--passes", o.passes, "Pipeline, e.g. 'canonicalize,fixpoint{max-iter=3}(cse,dce)'")
      ->each([&o](const std::string&) { o.passesGiven = true; });
  app.add_option("-O", o.preset, "Preset pipeline -O0..-O3 (default -O1)")->check(CLI::IsMember({"0", "1", "2", "3"}));
  app.add_option("--pipeline-file", o.pipelineFile, "Pipeline from a file (same syntax, newlines and # comments)");
  app.add_option("--rules", o.rulesFiles,
                 "Rule file to apply (repeatable): after the pipeline's rewrites, before its closing device lowering "
                 "(fuse-cudnn), like the passes in -O1,more");
  app.add_option("--quantize", o.quantize,
                 "int8: append quantize{dtype=int8} (static post-training quantization, calibrated on "
                 "--calibration; an accuracy guard keeps sensitive ops fp32) to the pipeline")
      ->check(CLI::IsMember({"int8"}));
  app.add_option("--calibration", o.calibration,
                 "Calibration batches for quantize: a file in the --inputs formats holding a list of batches "
                 "(torch.save([x1, x2, ...], FILE), each a tensor or a tuple of inputs)");
  app.add_flag("--print-pipeline", o.printPipeline, "Print the canonical pipeline");
  app.add_option("--preserve-methods", o.preserveMethods, "Methods besides forward to keep")->delimiter(',');
  registerVerifyCliOptions(app, o.verify);
  app.add_flag("--no-verify", o.noVerify, "Skip numerics verification");
  app.add_flag("--verify", o.verifyFlag, "Verify numerics (the default; fails when no inputs can be built)");
  app.add_flag("--verify-each", o.verifyEach,
               "Verify numerics after every pass that changed the model and name the first that breaks tolerance "
               "(also lints the IR and checks that each pass's edit log describes its change)");
  app.add_flag("--force", o.force, "Write OUT even when verification fails or OUT is measurably slower than IN");
  app.add_flag("--keep-training", o.keepTraining,
               "Refuse a model in training mode (scripted and saved in it, or traced in it) instead of optimizing it "
               "for inference in eval semantics");
  app.add_flag("--overwrite", o.overwrite, "Replace OUT if it exists");
  app.add_flag("--in-place", o.inPlace, "Allow OUT to be IN itself (replaced only after everything succeeded)");
  app.add_option("--report", o.reportPath, "Write a JSON record of the run (pipeline, counters, metrics) here");
  app.add_flag("--print-after-all", o.printAfterAll, "Print the IR after every pass");
  app.add_flag("--print-changed", o.printChanged, "Print a diff of the IR after every pass that changed it");
  app.add_flag("--time-passes", o.timePasses, "Print the table of time per pass (also with -q)");
  app.add_option("--bisect-limit", o.bisectLimit, "Run only the first N pass executions");
  app.add_flag("--explain", o.explain, "Print why passes declined rewrites");
  app.add_flag("--progress", o.progress, "Show per-pass progress on stderr (default when stderr is a terminal)");
  app.add_option("--dot-dir", o.dotDir, "Write drawings of the graph to DIR: before, after each pass that changed it "
                 "(as a diff), after");
  app.add_flag("--prefer-bf16", o.preferBf16, "-O3 / cast{dtype=auto}: bf16 on CUDA targets too");
  app.add_option("--target", o.target,
                 "Device the optimized model is for: auto (the verification device), cpu, cuda. A cuda target gets "
                 "fp16 (-O3) and cuDNN fusions; verified on a CPU by a stand-in without them")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--assume-isa", o.assumeIsa,
                 "Decide as on a CPU of this level (avx2|avx512|avx512_bf16|avx512_fp16|amx) instead of probing "
                 "this one: which precision -O3 picks, what --explain says (kernels still run on this CPU)")
      ->check(CLI::IsMember({"avx2", "avx512", "avx512_bf16", "avx512_fp16", "amx"}, CLI::ignore_case));
  app.add_flag("--no-measure", o.noMeasure,
               "Do not time OUT against IN (by default OUT is timed, and replaced by a faster verified candidate "
               "when it is measurably slower)");
  app.add_option("--measure-budget", o.measureBudget,
                 "Seconds per timing comparison of OUT against IN (default 2; at least 5 interleaved pairs)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--measure-threads", o.measureThreads, "Intra-op threads while timing (default 1)")
      ->check(CLI::PositiveNumber);
  registerTuneOptions(app, o.tune);
  app.add_flag("-q,--quiet", o.quiet, "Print only errors and the final line");
  app.add_flag("-v,--verbose", o.verbose, "Print more detail (per-output metrics, counters)");
  app.footer(
      "Examples:\n"
      "  ptopt in.pt out.pt                          # -O1, inputs inferred when safe\n"
      "  ptopt in.pt out.pt -O2 --input-shape 1,3,224,224\n"
      "  ptopt in.pt out.pt --passes 'remove-dropout,fold-conv-bn' --verify-each --input-shape 1,3,224,224\n"
      "  ptopt in.pt out.pt --inputs inputs.pt --atol out1:1e-3 --report run.json\n"
      "Exit codes: 0 success, 2 usage error or bad input (nothing written), 3 verification failed\n"
      "(nothing written unless --force), 1 any other failure.");
}

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read pipeline file '" + path + "' (check the path and its permissions)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The pipeline the options ask for (validated before anything is loaded).
// Rule files join it by the one rule for extra passes (rewriters/pipeline.h:
// after the rewrites, before the closing fuse-cudnn).
rewriters::Pipeline pipelineFromOptions(const OptimizeOptions& o) {
  const int sources = (o.passesGiven ? 1 : 0) + (!o.preset.empty() ? 1 : 0) + (!o.pipelineFile.empty() ? 1 : 0);
  if (sources > 1) throw UsageError("give only one of --passes, -O<level> and --pipeline-file");
  std::string text, source;
  if (o.passesGiven) { text = o.passes; source = "--passes"; }
  else if (!o.pipelineFile.empty()) { text = readFile(o.pipelineFile); source = o.pipelineFile; }
  else { text = rewriters::presetPipeline(o.preset.empty() ? 1 : std::stoi(o.preset)); source = "-O" + (o.preset.empty() ? std::string("1") : o.preset); }
  rewriters::Pipeline p = rewriters::parsePipeline(text, defaultRegistry(), source);
  std::vector<rewriters::PipelineElement> rules;
  for (const auto& file : o.rulesFiles) {
    std::ifstream probe(file);
    if (!probe) throw UsageError("cannot read rule file '" + file + "' (check the path and its permissions)");
    rules.push_back(rewriters::rulesElement(file));
  }
  rewriters::addExtraPasses(p, rules);
  if (!o.quantize.empty() && text.find("quantize") == std::string::npos) {
    // Like the extra passes: after the rewrites, before the device lowering.
    rewriters::Pipeline q = rewriters::parsePipeline("quantize{dtype=" + o.quantize + "}", defaultRegistry(), "--quantize");
    rewriters::addExtraPasses(p, q.elements);
  }
  return p;
}

// OUT must be writable and must not clobber anything unasked (exit 2).
void checkOutputPath(const OptimizeOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool exists = fs::exists(o.output, ec);
  if (exists && fs::is_directory(o.output, ec))
    throw UsageError("OUT '" + o.output + "' is a directory; give a file name such as " + o.output + "/model.opt.pt");
  if (exists && sameFile(o.input, o.output)) {
    if (!o.inPlace)
      throw UsageError("OUT '" + o.output + "' is the input file itself; choose another output path (or pass --in-place)");
  } else if (o.inPlace) {
    throw UsageError("--in-place: OUT '" + o.output + "' is not the input file");
  } else if (exists && !o.overwrite) {
    throw UsageError("'" + o.output + "' exists; pass --overwrite to replace it");
  }
  const fs::path dir = fs::path(o.output).has_parent_path() ? fs::path(o.output).parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw UsageError("the folder of OUT, '" + dir.string() + "', does not exist; create it first");
  if (::access(dir.c_str(), W_OK) != 0)
    throw UsageError("cannot write into '" + dir.string() + "' (permission denied); choose another output folder");
}

// Per-pass progress on stderr: one rewritten line on a terminal, one line per
// pass otherwise (--progress).
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(::isatty(STDERR_FILENO) != 0) {}
  void start(const std::string& pass, size_t execution) {
    if (!enabled_) return;
    const std::string line = fmt::format("[{:>3}] {:<24} {:6.1f} s", execution, pass, clock_.ms() / 1000);
    if (tty_) std::cerr << "\r\033[K" << line << std::flush;
    else std::cerr << line << "\n";
  }
  void finish() {
    if (enabled_ && tty_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  bool enabled_, tty_;
  Stopwatch clock_;
};

// One `ptopt IN OUT` run: what each stage hands to the next.
struct Run {
  explicit Run(const OptimizeOptions& options) : o(options) {}
  const OptimizeOptions& o;
  RunRecord record;                 // --report, filled as the stages go
  rewriters::Pipeline pipeline;     // plan
  std::string canonical;            // plan: the pipeline's text
  c10::Device device = c10::kCPU;   // plan: where verification runs
  std::optional<Optimizer> opt;     // load
  size_t nodesBefore = 0;           // load
  rewriters::PassContext ctx;       // reference: the passes' context
  verify::ToleranceSet tolerances;  // reference
  std::optional<verify::ReferenceRunner> runner;  // reference: nullopt when nothing is verified
  rewriters::RunReport report;      // run
  std::optional<quant::LowPrecisionRun> lowp;  // run: set when the pipeline lowered precision
  std::optional<quant::CalibrationData> calibration;  // reference: --calibration FILE, checked
  std::unique_ptr<ir::AtomicModuleFile> file;  // export: OUT's temporary file
  torch::jit::Module result;        // export: loaded back from `file`
  std::optional<Optimizer::StandIn> standIn;  // export: what a CPU checks instead, when it cannot run the result
  size_t nodesAfter = 0;            // export; measure: of what is written
  bool scriptedInTraining = false;  // load
  std::optional<Optimizer::Serialized> replacement;  // measure: written in place of `file`
  std::string written;              // measure: what is written in place of OUT ("" = OUT)
  Stopwatch total;                  // from load on
  std::string tuneSummary;          // tune: what --tune decided

  bool verifying() const { return runner && !o.noVerify; }
  void say(const std::string& s) const {
    if (!o.quiet) std::cout << s << std::flush;
  }
  // Writes --report and gives the exit code.
  int finish(int code, const std::string& outcome) {
    record.exitCode = code;
    record.outcome = outcome;
    if (!o.reportPath.empty()) writeReport(record, o.reportPath);
    return code;
  }
};

// plan: options and command line -> the pipeline and its canonical text,
// OUT checked, the verification device. Prints --print-pipeline; false when
// that was all that was asked.
bool plan(Run& r, int argc, char** argv) {
  const OptimizeOptions& o = r.o;
  for (int i = 0; i < argc; ++i) r.record.command += (i ? " " : "") + std::string(argv[i]);
  try {
    r.pipeline = pipelineFromOptions(o);
  } catch (const rewriters::PipelineError& e) {
    throw UsageError(std::string("invalid pipeline: ") + e.what());
  }
  r.canonical = rewriters::printPipeline(r.pipeline);
  r.record.pipeline = r.canonical;
  if (o.printPipeline) {
    std::cout << r.canonical << "\n";
    if (o.input.empty() && o.output.empty()) return false;
  }
  if (o.input.empty() || o.output.empty())
    throw UsageError("expected IN.pt OUT.pt (or a subcommand: show, verify, passes); see --help");
  if (o.noVerify && (o.verifyFlag || o.verifyEach)) throw UsageError("--no-verify contradicts --verify/--verify-each");
  checkOutputPath(o);
  if (!o.assumeIsa.empty()) target::assumeCpuIsa(target::parseIsa(o.assumeIsa));
  r.record.input = o.input;
  r.record.output = o.output;
  try {
    r.device = verify::resolveDevice(o.verify.device);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  r.record.device = verify::describeDevice(r.device);
  return true;
}

// load: IN -> the Optimizer (Optimizer::load: LibTorch's load and the
// import, timed), the counts before. Refuses a model in training mode with
// --keep-training.
void load(Run& r) {
  const OptimizeOptions& o = r.o;
  r.total.reset();
  Optimizer::LoadTimes times;
  r.opt.emplace(Optimizer::load(o.input, ir::ImportOptions{o.preserveMethods}, &times));
  r.record.stageMs["load"] = times.readMs;
  r.record.inputFileBytes = std::filesystem::file_size(o.input);
  r.record.stageMs["import"] = times.importMs;
  r.record.opsBefore = countOps(r.opt->model().forward());
  r.record.parameterBytesBefore = parameterBytes(r.opt->model());
  r.nodesBefore = r.opt->model().forward().numNodes();
  r.say(fmt::format("loaded {}: {} nodes, {} constants ({:.0f} ms)\n", o.input, r.nodesBefore,
                    r.opt->model().constants->size(), times.readMs + times.importMs));
  const ir::TrainingMode& mode = r.opt->trainingMode();
  r.record.mode = mode;
  r.scriptedInTraining = mode.scriptedInTraining;
  if (mode.inTraining() && o.keepTraining)
    throw ir::InputError(fmt::format(
        "{} is in training mode ({}), and --keep-training refuses to optimize it for inference; save it after "
        "model.eval() (or trace it in eval mode), or drop --keep-training to optimize it in eval semantics",
        o.input, mode.scriptedInTraining ? "scripted and saved with training=True" : "traced in training mode"));
}

// --calibration FILE: checked before any pass runs (bad data is the user's
// error: exit 2, nothing written). Without --inputs, verification runs on
// the last calibration batch, which the quantize pass holds out from
// calibration (int8 judged on random inputs far from the data it was
// calibrated on says nothing).
void loadCalibration(Run& r, InputPlan& inputs) {
  const OptimizeOptions& o = r.o;
  try {
    verify::InputSet set = verify::loadInputsFile(o.calibration);
    quant::CalibrationData data;
    data.source = o.calibration;
    std::optional<std::vector<c10::IValue>> expected;
    if (inputs.source && !inputs.inferred && !inputs.source->fixed) expected = inputs.source->inputsFor(0);
    data.batches = quant::splitCalibrationBatches(set.values, r.opt->model().forward().inputs().size(),
                                                  expected ? &*expected : nullptr, o.calibration);
    if (inputs.source && !inputs.source->fixed && data.batches.size() >= 2) {
      inputs.source->fixed = data.batches.back();
      inputs.inferred = false;
      r.say("note: verification runs on the last --calibration batch (held out from calibration)\n");
    }
    r.calibration = std::move(data);
  } catch (const std::invalid_argument& e) {
    throw ir::InputError(std::string("--calibration: ") + e.what());
  }
}

// The verification inputs (verify::planInputs on the flags), and the
// reference's outputs on them, computed once (r.runner). Gives the passes
// the inputs the user gave (shape-prop); with --no-verify they are still
// checked against the model once (exit 2).
void planVerification(Run& r, const Optimizer::Reference& reference) {
  const OptimizeOptions& o = r.o;
  InputPlan inputs = planInputs(o.verify, r.opt->model().forward());
  if (!o.calibration.empty()) loadCalibration(r, inputs);
  if (!inputs.source) {
    r.record.verificationSkipped = inputs.message;
    if (o.verifyFlag || o.verifyEach) throw UsageError(inputs.message);
    if (!o.noVerify) std::cerr << "ptopt: warning: " << inputs.message << "\n";
  } else if (!o.noVerify) {
    if (inputs.inferred) r.say("note: " + inputs.message + "\n");
    try {
      Stopwatch sw;
      r.runner.emplace(r.opt->referenceRunner(reference, *inputs.source, r.tolerances, r.device));
      r.record.stageMs["reference"] = sw.ms();
    } catch (const verify::ReferenceError& e) {
      if (!inputs.inferred) throw ir::InputError(e.what());
      // An assumption that does not fit is not the user's error.
      r.record.verificationSkipped = "the assumed input shape does not fit the model; give --input-shape to verify";
      if (!o.noVerify) std::cerr << "ptopt: warning: verification skipped: " << r.record.verificationSkipped << "\n";
      r.runner.reset();
    }
  }
  if (inputs.source && !inputs.inferred) {
    if (o.noVerify) {
      verify::InputSource once = *inputs.source;
      once.iterations = 1;
      try {
        r.opt->referenceRunner(reference, once, r.tolerances, r.device);
      } catch (const verify::ReferenceError& e) {
        throw ir::InputError(e.what());
      }
    }
    r.ctx.exampleInputs = inputs.source->inputsFor(0);
  }
  if (o.noVerify) r.record.verificationSkipped = "--no-verify";
}

// The target's capabilities (target/capabilities.h): in --report, and
// printed with --explain or -v.
void recordTarget(Run& r) {
  const std::string& device = r.ctx.targetDevice;
  nlohmann::json t = {{"device", device}, {"identity", target::deviceIdentity(device)}};
  if (device == "cuda") {
    const target::CudaCapabilities c = target::probeCuda();
    t["available"] = c.available;
    if (c.available)
      t.update({{"name", c.name}, {"compute_capability", std::to_string(c.major) + "." + std::to_string(c.minor)},
                {"native_fp16", c.nativeFp16}, {"native_bf16", c.nativeBf16}});
    else
      t["why"] = c.why;
  } else {
    const target::CpuCapabilities c = target::cpuCapabilities();
    t.update({{"cpu", c.brand}, {"isa", target::isaName(c.isa)}, {"onednn_isa", target::isaName(c.onednn)},
              {"aten_isa", target::isaName(c.aten)}, {"cpuid_isa", target::isaName(c.cpuid)},
              {"assumed", c.assumed}, {"native_bf16", c.nativeBf16}, {"bf16_why", c.bf16Why},
              {"native_fp16", c.nativeFp16}, {"fp16_why", c.fp16Why}});
  }
  r.record.sections["target"] = t;
  if (r.o.explain || r.o.verbose) r.say(target::describeTarget(device));
}

// reference: the loaded model -> what the result is compared with
// (Optimizer::reference; eval semantics for a model in training mode), the
// passes' context, the tolerances of the precision the pipeline introduces,
// and the reference outputs (planVerification).
void reference(Run& r) {
  const OptimizeOptions& o = r.o;
  const Optimizer::Reference reference = r.opt->reference(r.pipeline, r.device);
  const ir::TrainingMode& mode = r.opt->trainingMode();
  r.record.evalSemantics = mode.scriptedInTraining || reference.specializesTracedFlags;
  r.record.modeNotes = mode.notes(reference.specializesTracedFlags);
  for (const std::string& note : r.record.modeNotes) r.say("note: " + note + "\n");

  r.ctx.targetDevice = o.target != "auto" ? o.target : r.device.is_cuda() ? "cuda" : "cpu";
  if (o.explain) r.ctx.explain = &std::cout;
  r.ctx.preferBf16 = o.preferBf16;
  recordTarget(r);
  const c10::ScalarType precision =
      quant::lowestPrecisionIntroduced(r.pipeline, r.ctx).value_or(c10::ScalarType::Float);
  r.tolerances = tolerancesFrom(o.verify, verify::Tolerance::forPrecision(precision));
  planVerification(r, reference);
}

// tune (--tune): the pipeline's machine-dependent passes get their options
// from measurements on this device (tools/tune_stage.h, tune/tune_model.h);
// the tuned pipeline replaces the planned one, and the tolerances follow the
// precision it introduces.
void tuneStage(Run& r) {
  const OptimizeOptions& o = r.o;
  Stopwatch sw;
  tune::TuneResult t = runTuneStage(o.tune, r.opt->model(), r.pipeline, r.ctx, r.device, o.quiet);
  r.record.stageMs["tune"] = sw.ms();
  r.pipeline = t.pipeline;
  r.canonical = rewriters::printPipeline(r.pipeline);
  r.record.pipeline = r.canonical;
  r.record.tuning = t.toJson();
  r.tuneSummary = t.summary();
  const c10::ScalarType precision =
      quant::lowestPrecisionIntroduced(r.pipeline, r.ctx).value_or(c10::ScalarType::Float);
  r.tolerances = tolerancesFrom(o.verify, verify::Tolerance::forPrecision(precision));
  if (r.runner) r.runner->setTolerances(r.tolerances);
}

// The pass manager's instruments for the flags. With --verify-each, the
// edit-log self-check and per-pass blame (verify/blame.h: the first pass
// that breaks tolerance is printed, and the run stops unless --force).
rewriters::Instrumentation instrumentation(Run& r, Progress& progress, verify::PassBlamer* blamer,
                                           DotDirRecorder* drawings) {
  const OptimizeOptions& o = r.o;
  rewriters::Instrumentation inst;
  inst.printAfterAll = o.printAfterAll;
  inst.printChanged = o.printChanged;
  inst.wantChanges = !o.dotDir.empty();
  inst.verifyEach = o.verifyEach;
  inst.checkEditLog = o.verifyEach;
  inst.bisectLimit = o.bisectLimit;
  inst.out = &std::cout;
  inst.onPassStart = [&progress](const std::string& pass, size_t execution) { progress.start(pass, execution); };
  if (!blamer && !drawings) return inst;
  inst.onPassEnd = [&r, &progress, blamer, drawings](const rewriters::PassExecution& e, const ir::Graph& g) {
    if (drawings) drawings->afterPass(e, g);
    if (!blamer) return;
    std::optional<verify::Blame> blame = blamer->afterPass(e);
    if (!blame) return;
    r.record.blamedPass = blame->pass;
    progress.finish();
    std::cout << blame->message();
    if (!r.o.force) throw verify::BlameError(std::move(*blame));
  };
  return inst;
}

// run: the model -> the model after the pipeline (every method), its report
// and counters, and what a lower precision means for verification. False
// when --verify-each stopped the run at a pass that breaks tolerance.
bool run(Run& r) {
  const OptimizeOptions& o = r.o;
  Progress progress(o.progress || (::isatty(STDERR_FILENO) != 0 && !o.quiet));
  std::optional<verify::PassBlamer> blamer;
  if (o.verifyEach && r.verifying())
    blamer.emplace(*r.runner, [&r] { return r.opt->exportModule(); });
  std::unique_ptr<DotDirRecorder> drawings;
  if (!o.dotDir.empty())
    drawings = std::make_unique<DotDirRecorder>(o.dotDir, r.opt->model().forward(),
                                                std::filesystem::path(o.input).filename().string());
  const rewriters::Instrumentation inst =
      instrumentation(r, progress, blamer ? &*blamer : nullptr, drawings.get());
  Stopwatch sw;
  std::optional<quant::CalibrationScope> calibration;
  if (r.calibration) calibration.emplace(*r.calibration);
  quant::resetQuantizeReport();
  try {
    r.report = r.opt->run(r.pipeline, &r.ctx, inst);
  } catch (const verify::BlameError& blame) {
    progress.finish();
    r.record.stageMs["passes"] = sw.ms();
    r.record.verification = blame.blame.report;
    std::cout << "FAILED: nothing written (the first pass that breaks tolerance is " << blame.what()
              << "; use --force to write anyway): " << r.record.command << "\n";
    return false;
  }
  progress.finish();
  if (drawings) r.say(drawings->finish(r.opt->model().forward()));
  r.record.stageMs["passes"] = sw.ms();
  r.record.passes = r.report;
  r.say(fmt::format("pipeline: {}\n", r.canonical.empty() ? "(empty)" : r.canonical));
  if (!r.report.countersSummary().empty()) r.say(r.report.countersSummary());
  if (auto note = quant::autoPrecisionNote(r.pipeline, r.ctx)) {
    r.say("precision: " + *note + "\n");
    r.record.sections["precision"] = *note;
  }
  if (quant::lastQuantizeReport().ran) {
    r.record.quantize = quant::lastQuantizeReport();
    r.say(r.record.quantize->summary());
  }
  // Lower precision: a changed signature takes converted inputs.
  r.lowp = quant::lowPrecisionRun(r.pipeline, r.ctx, r.report);
  if (r.lowp && r.lowp->signatureChanged) r.say("note: " + r.lowp->signatureNote() + "\n");
  if (r.runner && r.lowp && r.lowp->signatureChanged)
    r.runner->inputAdapter = [lowp = *r.lowp](std::vector<c10::IValue> in) { return lowp.adaptInputs(std::move(in)); };
  return true;
}

// Why the measure stage will not time OUT against IN (before verification
// has said whether OUT passed); nullopt when it will.
std::optional<std::string> whyNotMeasured(const Run& r) {
  if (r.o.noMeasure) return "--no-measure";
  if (const char* env = std::getenv("PTOPT_NO_MEASURE"); env && *env && std::string(env) != "0")
    return "--no-measure (PTOPT_NO_MEASURE is set)";
  const std::string here = r.device.is_cuda() ? "cuda" : "cpu";
  if (r.ctx.targetDevice != here)
    return "the model is for " + r.ctx.targetDevice + " and this run is on " + here + ": time it there";
  if (!r.runner && !r.ctx.exampleInputs) return "no inputs to time it with: give --input-shape";
  return std::nullopt;
}

// export: the model -> OUT's temporary file (streamed from the module's
// tensors, flushed to disk) and the module loaded back from it: what is
// verified is what is written. The counts after. A full disk is a write
// error (exit 1); a model that does not serialize or load back, a ptopt bug.
void exportResult(Run& r) {
  auto bug = [](const std::exception& e) {
    return std::runtime_error("the optimized model does not serialize and load back: " + ir::torchErrorMessage(e) +
                              "\n(a ptopt bug: please report it with the model; --passes '' shows whether a pass is "
                              "the cause)");
  };
  Stopwatch sw;
  torch::jit::Module exported;
  try {
    exported = r.opt->exportModule();
  } catch (const std::exception& e) {
    throw bug(e);
  }
  r.record.stageMs["export"] = sw.ms();
  r.nodesAfter = r.opt->model().forward().numNodes();
  if (r.nodesAfter > 20000)
    r.say(fmt::format("note: {} nodes in one graph: LibTorch's executor recurses about once per node on a graph's "
                      "first run, which can overflow a default 8 MiB stack (ptopt runs on a 1 GiB one). Run the "
                      "model on a thread with a larger stack (Python: threading.stack_size(1 << 30)) or raise "
                      "`ulimit -s`.\n",
                      r.nodesAfter));
  r.record.opsAfter = countOps(r.opt->model().forward());
  r.record.parameterBytesAfter = parameterBytes(r.opt->model());
  sw.reset();
  r.file = std::make_unique<ir::AtomicModuleFile>(r.o.output);
  try {
    r.file->write(exported);
  } catch (const std::system_error& e) {
    throw WriteError(e.what());
  } catch (const std::exception& e) {
    throw bug(e);
  }
  exported = torch::jit::Module();
  if (r.verifying()) r.standIn = r.opt->cpuStandIn(r.pipeline, r.ctx, r.report, r.device);
  // Letting go of what nothing reads any more before the load-back, so that
  // the weights are not held twice: the IR (its folded weights); and the
  // original too, unless a stand-in is checked or the measure stage times
  // IN (it has its own copy of every weight a pass replaced).
  if (!r.standIn) {
    if (whyNotMeasured(r)) r.opt.reset();
    else r.opt->model() = ir::Model();
  }
  try {
    r.result = r.file->load();
  } catch (const std::exception& e) {
    throw bug(e);
  }
  r.record.stageMs["save"] = sw.ms();  // write and load back; the rename is added by save
}

// verify: the loaded-back result (or, where this device cannot run it, the
// Optimizer's CPU stand-in) against the reference outputs -> whether it
// passed, and the verdict to print.
bool verifyResult(Run& r, std::string& verdict) {
  const OptimizeOptions& o = r.o;
  verdict = o.noVerify ? "skipped (--no-verify)" : "skipped (" + r.record.verificationSkipped + ")";
  if (!r.verifying()) return true;
  Stopwatch sw;
  verify::VerifyReport v;
  if (r.standIn) {
    for (const std::string& note : r.standIn->notes) r.runner->notes.push_back(note);
    v = r.runner->check(r.standIn->module);
  } else {
    v = r.runner->check(r.result);
  }
  for (const auto& note : v.notes) r.say("note: " + note + "\n");
  r.record.stageMs["verify"] = sw.ms();
  const bool ok = v.passed && !r.record.blamedPass;
  verdict = v.verdict();
  if (!v.passed) verdict += "\n" + v.failureReport();
  else if (o.verbose && !v.iterations.empty()) verdict += "\n" + v.iterations.front().comparison.summary();
  warnUnknownOutputs(r.tolerances, v);
  r.record.verification = std::move(v);
  return ok;
}

// The closing summary: op table, sizes, pass times, stage times (-q: only
// the pass times with --time-passes).
void printSummary(Run& r) {
  const OptimizeOptions& o = r.o;
  if (o.quiet) {
    if (o.timePasses) std::cout << r.report.timingTable();
    return;
  }
  RunRecord& rec = r.record;
  auto ms = [&rec](const char* stage) { return rec.stageMs[stage]; };  // a stage that did not run: 0 (in --report too)
  std::cout << formatOpTable(rec.opsBefore, &rec.opsAfter, ::isatty(STDOUT_FILENO) != 0);
  std::cout << fmt::format("nodes {} -> {}; parameters {} -> {}; file {} -> {} ({})\n", r.nodesBefore,
                           r.nodesAfter, formatBytes(double(rec.parameterBytesBefore)),
                           formatBytes(double(rec.parameterBytesAfter)), formatBytes(double(*rec.inputFileBytes)),
                           formatBytes(double(*rec.outputFileBytes)), o.output);
  std::cout << r.report.timingTable();
  std::cout << r.tuneSummary;
  if (rec.evalSemantics)
    std::cout << fmt::format("mode: {} in training mode; optimized and verified in eval semantics "
                             "(--keep-training refuses instead)\n",
                             r.scriptedInTraining ? "scripted and saved" : "traced");
  std::cout << fmt::format("time: load {:.0f} ms, import {:.0f} ms, {}passes {:.0f} ms, export {:.0f} ms, verify {:.0f} ms, "
                           "measure {:.0f} ms, save {:.0f} ms\n",
                           ms("load"), ms("import"), o.tune.tune ? fmt::format("tune {:.0f} ms, ", ms("tune")) : "",
                           ms("passes"), ms("export"), ms("verify"), ms("measure"), ms("save"));
}

// The bytes of IN, as a candidate to write unchanged.
std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) throw std::runtime_error("cannot read '" + path + "'");
  return ss.str();
}

// Verifies a fallback candidate by the fp32 criterion, on the inputs as
// they are (the runner is restored afterwards); throws when it fails.
void checkFp32(Run& r, const torch::jit::Module& candidate) {
  const verify::ToleranceSet saved = r.runner->tolerances();
  auto adapter = std::move(r.runner->inputAdapter);
  r.runner->inputAdapter = nullptr;
  r.runner->setTolerances(tolerancesFrom(r.o.verify, verify::Tolerance::forPrecision(c10::ScalarType::Float)));
  const verify::VerifyReport v = r.runner->check(candidate);
  r.runner->setTolerances(saved);
  r.runner->inputAdapter = std::move(adapter);
  if (!v.passed) throw std::runtime_error("fails verification: " + v.verdict());
}

// The never-slower verdict in the tuning cache (--tune only;
// tools/measure_cache.h): keyed by the digests of IN and of OUT's temporary
// file, the timed inputs and the timing settings. nullopt without --tune, or
// when the cache or a file cannot be read (the stage then times as usual).
struct VerdictCache {
  tune::TuningCache cache;
  VerdictKey key;
};
std::optional<VerdictCache> openVerdictCache(const Run& r, const MeasureOptions& mo,
                                             const std::vector<c10::IValue>& inputs) {
  if (!r.o.tune.tune) return std::nullopt;
  const std::string path = r.o.tune.cachePath.empty() ? tune::TuningCache::defaultPath() : r.o.tune.cachePath;
  try {
    return VerdictCache{tune::TuningCache::open(path),
                        verdictKey(r.device, mo, fileDigest(r.o.input), fileDigest(r.file->tempPath()), inputs)};
  } catch (const std::exception&) {
    return std::nullopt;  // the tune stage has warned about a damaged cache
  }
}

// The cached verdict for this run, when one applies: the fp32 structure it
// chose is rebuilt and verified (never cached) and must have the bytes it had.
std::optional<NeverSlowerResult> cachedVerdict(const VerdictCache& vc, const std::vector<Candidate>& candidates,
                                               bool force, const std::optional<BuiltCandidate>& built) {
  const std::optional<CachedVerdict> hit = lookupVerdict(vc.cache, vc.key);
  if (!hit) return std::nullopt;
  std::optional<NeverSlowerResult> picked = applyCachedVerdict(*hit, candidates, force);
  if (!picked || candidates[picked->chosen].name != "fp32 structure") return picked;
  try {
    candidates[picked->chosen].build();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!built || bytesDigest(built->result.bytes) != hit->writtenDigest) return std::nullopt;
  return picked;
}

// measure: OUT timed against IN, interleaved and bounded (tools/measure.h).
// When OUT is measurably slower (and no --force), the candidates after it
// are tried in order: the same pipeline without its precision and layout
// passes (the fp32 structure; built, exported and verified here), then IN
// itself, re-saved; the first not measurably slower is r.replacement. With
// --tune, a verdict an earlier run measured for the same IN, OUT and machine
// is taken from the tuning cache instead of timing again.
void measure(Run& r, bool ok) {
  const OptimizeOptions& o = r.o;
  nlohmann::json rec = {{"budget_s", o.measureBudget}, {"threads", o.measureThreads}};
  auto skip = [&](const std::string& why) {
    rec["skipped"] = why;
    r.record.sections["measurement"] = rec;
    if (why.rfind("--no-measure", 0) != 0) r.say("speed: not measured (" + why + ")\n");
  };
  if (auto why = whyNotMeasured(r)) return skip(*why);
  if (!ok) return skip("verification failed");
  std::vector<c10::IValue> inputs = r.runner ? r.runner->inputs().inputsFor(0) : *r.ctx.exampleInputs;
  for (auto& v : inputs) v = verify::toDevice(v, r.device);
  std::vector<c10::IValue> outInputs = r.lowp ? r.lowp->adaptInputs(inputs) : inputs;

  MeasureOptions mo;
  mo.budgetSeconds = o.measureBudget;
  mo.threads = o.measureThreads;
  mo.optimizingExecutor = o.verify.executor == "optimizing";  // --verify-executor
  rec["executor"] = mo.optimizingExecutor ? "optimizing" : "plain";
  Stopwatch sw;
  // IN as given (a copy on CUDA: the original stays on the CPU for imports).
  const std::function<double()> timeIn =
      moduleTimer(r.device.is_cuda() ? r.opt->original().clone() : r.opt->original(), inputs, r.device);

  // The candidates, best first; each is built only when the one before it
  // was measurably slower (--force: OUT alone).
  std::vector<Candidate> candidates;
  candidates.push_back({"output", "the optimized model", [&] { return moduleTimer(r.result, outInputs, r.device); }});
  const std::optional<StructurePipeline> structure = fp32StructurePipeline(r.pipeline);
  std::optional<BuiltCandidate> built;
  if (structure && !o.force)
    candidates.push_back({"fp32 structure", structure->description(), [&] {
                            built = buildCandidate(r.opt->original(), ir::ImportOptions{o.preserveMethods},
                                                   structure->pipeline, r.ctx);
                            if (r.runner) checkFp32(r, built->result.module);  // verified like OUT
                            return moduleTimer(built->result.module, inputs, r.device);
                          }});
  if (!o.force)
    candidates.push_back({"input", "the input model itself", [] { return std::function<double()>([] { return 0.0; }); }});

  std::optional<VerdictCache> vc = openVerdictCache(r, mo, inputs);
  std::optional<NeverSlowerResult> fromCache;
  if (vc) fromCache = cachedVerdict(*vc, candidates, o.force, built);
  NeverSlowerResult picked;
  if (fromCache) {
    picked = *fromCache;
  } else {
    try {
      ScopedThreads threads(mo.threads);
      torch::NoGradGuard noGrad;
      torch::jit::GraphOptimizerEnabledGuard optimizer(mo.optimizingExecutor);
      picked = pickNotSlower(timeIn, candidates, mo, steadyNowMs);
      if (candidates.size() == 1) {  // --force: OUT is written whatever it measures; time it anyway
        picked.tried.back().measurement = measurePair(timeIn, candidates[0].build(), mo, steadyNowMs);
        picked.tried.back().measurement->threads = at::get_num_threads();
      }
    } catch (const std::exception& e) {
      return skip(std::string("a model failed while timed: ") + ir::torchErrorMessage(e));
    }
    if (vc) {
      CachedVerdict v;
      v.picked = picked;
      for (const auto& c : candidates) v.names.push_back(c.name);
      if (built && candidates[picked.chosen].name == "fp32 structure") v.writtenDigest = bytesDigest(built->result.bytes);
      v.forced = o.force;
      v.seconds = sw.ms() / 1000;
      storeVerdict(vc->cache, vc->key, v);
      try {
        vc->cache.save();
      } catch (const tune::CacheError& e) {
        std::cerr << "ptopt: warning: the speed verdict is not cached: " << e.what() << "\n";
      }
    }
  }
  r.record.stageMs["measure"] = sw.ms();
  rec["source"] = fromCache ? "cached" : "measured";
  std::string cachedNote;  // " (measured in an earlier run, cached in FILE)"
  if (fromCache) {
    rec["cache"] = vc->cache.path();
    rec["note"] = "measured in an earlier run, cached in " + vc->cache.path();
    cachedNote = " (" + rec["note"].get<std::string>() + ")";
  }

  nlohmann::json tried = nlohmann::json::array();
  for (const auto& t : picked.tried) {
    nlohmann::json j = {{"candidate", t.name}};
    if (t.measurement) j.update(speedToJson(*t.measurement));
    if (!t.error.empty()) j["error"] = t.error;
    tried.push_back(j);
  }
  rec["candidates"] = tried;
  const CandidateOutcome& first = picked.tried.front();
  if (first.measurement) {
    const SpeedMeasurement& m = *first.measurement;
    rec.update({{"speedup", 1 / m.ratio.median}, {"ratio", m.ratio.median}, {"ci95", {m.ratio.low, m.ratio.high}},
                {"verdict", verdictName(m.verdict)}});
    r.say(fmt::format("speed: OUT/IN latency {}: {}{}\n", m.line(),
                      m.verdict == SpeedVerdict::Faster   ? "OUT is faster"
                      : m.verdict == SpeedVerdict::Slower ? "OUT is measurably slower than IN"
                                                          : "no clear difference",
                      cachedNote));
  } else if (!first.error.empty()) {
    r.say("speed: OUT could not be timed: " + first.error + cachedNote + "\n");
  }
  const Candidate& chosen = candidates[picked.chosen];
  rec["written"] = chosen.name;
  r.record.sections["measurement"] = rec;
  if (picked.chosen == 0) {
    if (o.force && first.measurement && first.measurement->verdict == SpeedVerdict::Slower)
      std::cout << "warning: OUT is measurably slower than IN; written anyway (--force)\n";
    return;
  }
  for (size_t i = 1; i < picked.tried.size(); ++i) {
    const CandidateOutcome& t = picked.tried[i];
    const std::string what = candidates[i].name + " (" + candidates[i].description + ")";
    if (!t.error.empty()) r.say("speed: " + what + " not usable: " + t.error + "\n");
    else if (t.measurement) r.say(fmt::format("speed: {}: {}\n", what, t.measurement->line()));
  }
  r.written = chosen.name == "input" ? "the input model (unchanged)" : chosen.name;
  std::cout << "note: OUT was measurably slower than IN" << (first.error.empty() ? "" : " (it cannot run here)")
            << ", so ptopt writes " << r.written << " ("
            << chosen.description << ") instead; --force writes the slower OUT anyway\n";
  if (chosen.name == "fp32 structure") {
    r.replacement = std::move(built->result);
    r.nodesAfter = built->nodes;
    r.record.opsAfter = countOps(built->model->forward());
    r.record.parameterBytesAfter = parameterBytes(*built->model);
  } else {
    Optimizer::Serialized s;
    s.bytes = readBytes(o.input);
    s.module = r.opt->original();
    r.replacement = std::move(s);
    r.nodesAfter = r.nodesBefore;
    r.record.opsAfter = r.record.opsBefore;
    r.record.parameterBytesAfter = r.record.parameterBytesBefore;
  }
}

// save: the verified temporary file renamed over OUT (or removed, by the
// AtomicModuleFile's destructor, when it is not written), then the summary
// and the last line. A failed check writes nothing (exit 3) unless --force.
int save(Run& r, bool ok, const std::string& verdict) {
  const OptimizeOptions& o = r.o;
  if (!ok && !o.force) {
    std::cout << "verification: " << verdict;
    if (verdict.back() != '\n') std::cout << "\n";
    std::cout << "FAILED: nothing written (use --force to write anyway): " << r.record.command << "\n";
    return r.finish(3, "failed");
  }
  Stopwatch sw;
  try {
    if (r.replacement) {
      r.file.reset();  // the slower OUT's temporary file is removed
      Optimizer::save(*r.replacement, o.output);
    } else {
      r.file->commit();
    }
  } catch (const std::exception& e) {
    throw WriteError(e.what());
  }
  r.record.stageMs["save"] += sw.ms();
  r.record.outputFileBytes = std::filesystem::file_size(o.output);
  printSummary(r);
  r.say("verification: " + verdict + (verdict.back() == '\n' ? "" : "\n"));
  std::cout << (ok ? "PASSED: " : "FAILED (written with --force): ") << r.record.command
            << (r.written.empty() ? "" : " (wrote " + r.written + " instead: the optimized model was slower)")
            << fmt::format(" ({:.1f} s)\n", r.total.ms() / 1000);
  return r.finish(ok ? 0 : 3, !ok              ? "written despite failure (--force)"
                              : r.written.empty() ? "passed"
                                                  : "passed; wrote " + r.written + " (the optimized model was slower)");
}

}  // namespace

int runOptimize(const OptimizeOptions& o, int argc, char** argv) {
  Run r(o);
  if (!plan(r, argc, argv)) return 0;
  load(r);
  reference(r);
  if (o.tune.tune) tuneStage(r);
  if (!run(r)) return r.finish(3, "failed");
  exportResult(r);
  std::string verdict;
  const bool ok = verifyResult(r, verdict);
  measure(r, ok);
  return save(r, ok, verdict);
}

}  // namespace ptopt::tools
