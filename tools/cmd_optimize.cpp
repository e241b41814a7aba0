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
// From reference on, the stages are the library's (tools/stages.h), which
// optimizeModule (tools/session.h, the Python package) runs too; here they
// get the command line's settings and hooks (OUT streamed to its temporary
// file, lines on stdout, exit codes), and the --report record.
#include "tools/api.h"
#include "tools/commands.h"
#include "tools/dot_dir.h"
#include "tools/measure_cache.h"
#include "tools/op_table.h"
#include "tools/report.h"
#include "tools/stages.h"
#include "tools/util.h"
#include "tools/verify_setup.h"

#include "ir/model.h"
#include "quant/calibration.h"
#include "quant/precision_check.h"
#include "quant/quantize_report.h"
#include "target/capabilities.h"
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
  app.add_option("--passes", o.passes,
                 "Pipeline, e.g. 'canonicalize,fixpoint{max-iter=3}(cse,dce)', or a preset and more passes, "
                 "e.g. '-O2,quantize{mode=dynamic}' (the more go after the rewrites, before fuse-cudnn)")
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
  // `--passes '-O2,quantize{mode=dynamic}'`: a preset and more passes, the
  // more placed by the one rule for extra passes.
  rewriters::Pipeline p = o.passesGiven ? rewriters::parsePipelineOrPreset(text, defaultRegistry())
                                        : rewriters::parsePipeline(text, defaultRegistry(), source);
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

// One `ptopt IN OUT` run: the shared stages' state (tools/stages.h) and
// what only the command line has.
struct Run {
  explicit Run(const OptimizeOptions& options) : o(options) {}
  const OptimizeOptions& o;
  Stages s;                         // plan, load, and every stage after
  std::unique_ptr<ir::AtomicModuleFile> file;  // export: OUT's temporary file
  Stopwatch total;                  // from load on

  RunRecord& record() { return s.record; }
  void say(const std::string& line) const {
    if (!o.quiet) std::cout << line << std::flush;
  }
  // Writes --report and gives the exit code.
  int finish(int code, const std::string& outcome) {
    s.record.exitCode = code;
    s.record.outcome = outcome;
    if (!o.reportPath.empty()) writeReport(s.record, o.reportPath);
    return code;
  }
};

// The bytes of IN, as a candidate to write unchanged.
std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) throw std::runtime_error("cannot read '" + path + "'");
  return ss.str();
}

// The flags as the shared stages' settings.
StageSettings stageSettings(const OptimizeOptions& o, c10::Device device) {
  StageSettings s;
  s.device = device;
  s.target = o.target;
  s.preferBf16 = o.preferBf16;
  s.verify = !o.noVerify;
  s.describeTarget = o.explain || o.verbose;
  s.explain = o.explain ? &std::cout : nullptr;
  s.tolerances = [&o](const verify::Tolerance& base) { return tolerancesFrom(o.verify, base); };
  s.importOptions = ir::ImportOptions{o.preserveMethods};
  s.tune = o.tune.tune;
  s.tuneBudgetSeconds = o.tune.budgetSeconds;
  s.tuningCache = o.tune.cachePath;
  s.tuneProgress = o.quiet ? nullptr : &std::cerr;
  s.measure = !o.noMeasure;
  s.noMeasureReason = "--no-measure";
  s.force = o.force;
  s.measureOptions.budgetSeconds = o.measureBudget;
  s.measureOptions.threads = o.measureThreads;
  s.measureOptions.optimizingExecutor = o.verify.executor == "optimizing";  // --verify-executor
  return s;
}

// Where the command line differs from the library: lines on stdout (not
// with -q, except what must be seen), and OUT's bytes streamed into its
// temporary file, then loaded back from it.
StageHooks stageHooks(Run& r) {
  StageHooks h;
  h.say = [&r](const std::string& line) { r.say(line); };
  h.note = [&r](const std::string& note) { r.say("note: " + note + "\n"); };
  h.notice = [](const std::string& note) { std::cout << "note: " << note << "\n"; };
  h.warning = [](const std::string& w) { std::cerr << "ptopt: WARNING: " << w << "\n"; };
  h.write = [&r](const torch::jit::Module& exported) {
    r.file = std::make_unique<ir::AtomicModuleFile>(r.o.output);
    r.file->write(exported);
    return r.file->load();
  };
  h.inputDigest = [&r] { return fileDigest(r.o.input); };
  h.outputDigest = [&r] { return fileDigest(r.file->tempPath()); };
  h.inputAsOutput = [&r] {
    Optimizer::Serialized s;
    s.bytes = readBytes(r.o.input);
    s.module = r.s.opt->original();
    return s;
  };
  return h;
}

// plan: options and command line -> the pipeline and its canonical text,
// OUT checked, the verification device, the stages' settings. Prints
// --print-pipeline; false when that was all that was asked.
bool plan(Run& r, int argc, char** argv) {
  const OptimizeOptions& o = r.o;
  RunRecord& record = r.record();
  for (int i = 0; i < argc; ++i) record.command += (i ? " " : "") + std::string(argv[i]);
  try {
    r.s.pipeline = pipelineFromOptions(o);
  } catch (const rewriters::PipelineError& e) {
    throw UsageError(std::string("invalid pipeline: ") + e.what());
  }
  record.pipeline = rewriters::printPipeline(r.s.pipeline);
  if (o.printPipeline) {
    std::cout << record.pipeline << "\n";
    if (o.input.empty() && o.output.empty()) return false;
  }
  if (o.input.empty() || o.output.empty())
    throw UsageError("expected IN.pt OUT.pt (or a subcommand: show, verify, passes); see --help");
  if (o.noVerify && (o.verifyFlag || o.verifyEach)) throw UsageError("--no-verify contradicts --verify/--verify-each");
  checkOutputPath(o);
  if (!o.assumeIsa.empty()) target::assumeCpuIsa(target::parseIsa(o.assumeIsa));
  record.input = o.input;
  record.output = o.output;
  c10::Device device = c10::kCPU;
  try {
    device = verify::resolveDevice(o.verify.device);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  record.device = verify::describeDevice(device);
  r.s.settings = stageSettings(o, device);
  r.s.hooks = stageHooks(r);
  return true;
}

// load: IN -> the Optimizer (Optimizer::load: LibTorch's load and the
// import, timed), the counts before. Refuses a model in training mode with
// --keep-training.
void load(Run& r) {
  const OptimizeOptions& o = r.o;
  r.total.reset();
  Optimizer::LoadTimes times;
  r.s.opt.emplace(Optimizer::load(o.input, ir::ImportOptions{o.preserveMethods}, &times));
  r.record().stageMs["load"] = times.readMs;
  r.record().inputFileBytes = std::filesystem::file_size(o.input);
  r.record().stageMs["import"] = times.importMs;
  countBefore(r.s);
  r.say(fmt::format("loaded {}: {} nodes, {} constants ({:.0f} ms)\n", o.input, r.s.nodesBefore,
                    r.s.opt->model().constants->size(), times.readMs + times.importMs));
  const ir::TrainingMode& mode = r.s.opt->trainingMode();
  if (mode.inTraining() && o.keepTraining)
    throw ir::InputError(fmt::format(
        "{} is in training mode ({}), and --keep-training refuses to optimize it for inference; save it after "
        "model.eval() (or trace it in eval mode), or drop --keep-training to optimize it in eval semantics",
        o.input, mode.scriptedInTraining ? "scripted and saved with training=True" : "traced in training mode"));
}

// --calibration FILE: loaded, then the shared calibration stage checks it
// before any pass runs (bad data is the user's error: exit 2, nothing
// written) and, without --inputs, verifies on its held-out last batch.
void loadCalibration(Run& r, InputPlan& inputs) {
  const OptimizeOptions& o = r.o;
  verify::InputSet set;
  try {
    set = verify::loadInputsFile(o.calibration);
  } catch (const std::invalid_argument& e) {
    throw ir::InputError(std::string("--calibration: ") + e.what());
  }
  calibrationStage(r.s, set.values, o.calibration, "--calibration", inputs);
}

// reference: the shared stage (the module the result is compared with, the
// passes' context, the tolerances), then the verification inputs planned
// from the flags and the reference's outputs on them, computed once. Given
// inputs that do not fit are exit 2; an assumed shape that does not fit
// skips verification with a warning; with --no-verify given inputs are
// still checked against the model once.
void reference(Run& r) {
  const OptimizeOptions& o = r.o;
  RunRecord& record = r.record();
  const Optimizer::Reference reference = referenceStage(r.s);
  InputPlan inputs = planInputs(o.verify, r.s.opt->model().forward());
  if (!o.calibration.empty()) loadCalibration(r, inputs);
  if (!inputs.source) {
    record.verificationSkipped = inputs.message;
    if (o.verifyFlag || o.verifyEach) throw UsageError(inputs.message);
    if (!o.noVerify) std::cerr << "ptopt: warning: " << inputs.message << "\n";
  } else if (!o.noVerify && inputs.inferred) {
    r.say("note: " + inputs.message + "\n");
  }
  try {
    referenceOutputs(r.s, reference, inputs);
  } catch (const verify::ReferenceError& e) {
    if (!inputs.inferred) throw ir::InputError(e.what());
    // An assumption that does not fit is not the user's error.
    record.verificationSkipped = "the assumed input shape does not fit the model; give --input-shape to verify";
    std::cerr << "ptopt: warning: verification skipped: " << record.verificationSkipped << "\n";
    r.s.runner.reset();
  }
  if (o.noVerify) record.verificationSkipped = "--no-verify";
}

// tune (--tune): the shared stage; no input shapes is a usage error.
void tune(Run& r) {
  try {
    tuneStage(r.s);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
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
    r.record().blamedPass = blame->pass;
    progress.finish();
    std::cout << blame->message();
    if (!r.o.force) throw verify::BlameError(std::move(*blame));
  };
  return inst;
}

// run: the shared stage with the command line's instruments (progress,
// --print-*, --dot-dir, --verify-each). False when --verify-each stopped
// the run at a pass that breaks tolerance.
bool run(Run& r) {
  const OptimizeOptions& o = r.o;
  Progress progress(o.progress || (::isatty(STDERR_FILENO) != 0 && !o.quiet));
  std::optional<verify::PassBlamer> blamer;
  if (o.verifyEach && r.s.verifying()) blamer.emplace(*r.s.runner, [&r] { return r.s.opt->exportModule(); });
  std::unique_ptr<DotDirRecorder> drawings;
  if (!o.dotDir.empty())
    drawings = std::make_unique<DotDirRecorder>(o.dotDir, r.s.opt->model().forward(),
                                                std::filesystem::path(o.input).filename().string());
  const rewriters::Instrumentation inst = instrumentation(r, progress, blamer ? &*blamer : nullptr, drawings.get());
  try {
    runStage(r.s, inst);
  } catch (const verify::BlameError& blame) {
    progress.finish();
    r.record().verification = blame.blame.report;
    std::cout << "FAILED: nothing written (the first pass that breaks tolerance is " << blame.what()
              << "; use --force to write anyway): " << r.record().command << "\n";
    return false;
  }
  progress.finish();
  if (drawings) r.say(drawings->finish(r.s.opt->model().forward()));
  return true;
}

// export: the shared stage, streaming into OUT's temporary file (a full
// disk is a write error: exit 1).
void exportResult(Run& r) {
  try {
    exportStage(r.s);
  } catch (const std::system_error& e) {
    throw WriteError(e.what());
  }
  if (r.s.nodesAfter > 20000)
    r.say(fmt::format("note: {} nodes in one graph: LibTorch's executor recurses about once per node on a graph's "
                      "first run, which can overflow a default 8 MiB stack (ptopt runs on a 1 GiB one). Run the "
                      "model on a thread with a larger stack (Python: threading.stack_size(1 << 30)) or raise "
                      "`ulimit -s`.\n",
                      r.s.nodesAfter));
}

// verify: the shared stage -> whether it passed, and the verdict to print.
bool verifyResult(Run& r, std::string& verdict) {
  const OptimizeOptions& o = r.o;
  verdict = o.noVerify ? "skipped (--no-verify)" : "skipped (" + r.record().verificationSkipped + ")";
  const bool ok = verifyStage(r.s);
  if (!r.s.verifying()) return ok;
  const verify::VerifyReport& v = *r.record().verification;
  verdict = v.verdict();
  if (!v.passed) verdict += "\n" + v.failureReport();
  else if (o.verbose && !v.iterations.empty()) verdict += "\n" + v.iterations.front().comparison.summary();
  warnUnknownOutputs(r.s.tolerances, v);
  return ok;
}

// The closing summary: op table, sizes, pass times, stage times (-q: only
// the pass times with --time-passes).
void printSummary(Run& r) {
  const OptimizeOptions& o = r.o;
  if (o.quiet) {
    if (o.timePasses) std::cout << r.s.report.timingTable();
    return;
  }
  RunRecord& rec = r.record();
  auto ms = [&rec](const char* stage) { return rec.stageMs[stage]; };  // a stage that did not run: 0 (in --report too)
  std::cout << formatOpTable(rec.opsBefore, &rec.opsAfter, ::isatty(STDOUT_FILENO) != 0);
  std::cout << fmt::format("nodes {} -> {}; parameters {} -> {}; file {} -> {} ({})\n", r.s.nodesBefore,
                           r.s.nodesAfter, formatBytes(double(rec.parameterBytesBefore)),
                           formatBytes(double(rec.parameterBytesAfter)), formatBytes(double(*rec.inputFileBytes)),
                           formatBytes(double(*rec.outputFileBytes)), o.output);
  std::cout << r.s.report.timingTable();
  if (r.s.tuned) std::cout << r.s.tuned->summary();
  if (rec.evalSemantics)
    std::cout << fmt::format("mode: {} in training mode; optimized and verified in eval semantics "
                             "(--keep-training refuses instead)\n",
                             rec.mode && rec.mode->scriptedInTraining ? "scripted and saved" : "traced");
  std::cout << fmt::format("time: load {:.0f} ms, import {:.0f} ms, {}passes {:.0f} ms, export {:.0f} ms, verify {:.0f} ms, "
                           "measure {:.0f} ms, save {:.0f} ms\n",
                           ms("load"), ms("import"), o.tune.tune ? fmt::format("tune {:.0f} ms, ", ms("tune")) : "",
                           ms("passes"), ms("export"), ms("verify"), ms("measure"), ms("save"));
}

// save: the verified temporary file renamed over OUT (or removed, by the
// AtomicModuleFile's destructor, when it is not written), then the summary
// and the last line. A failed check writes nothing (exit 3) unless --force.
int save(Run& r, bool ok, const std::string& verdict) {
  const OptimizeOptions& o = r.o;
  RunRecord& record = r.record();
  if (!ok && !o.force) {
    std::cout << "verification: " << verdict;
    if (verdict.back() != '\n') std::cout << "\n";
    std::cout << "FAILED: nothing written (use --force to write anyway): " << record.command << "\n";
    return r.finish(3, "failed");
  }
  Stopwatch sw;
  try {
    if (r.s.replacement) {
      r.file.reset();  // the slower OUT's temporary file is removed
      Optimizer::save(*r.s.replacement, o.output);
    } else {
      r.file->commit();
    }
  } catch (const std::exception& e) {
    throw WriteError(e.what());
  }
  record.stageMs["save"] += sw.ms();
  record.outputFileBytes = std::filesystem::file_size(o.output);
  printSummary(r);
  r.say("verification: " + verdict + (verdict.back() == '\n' ? "" : "\n"));
  const std::string& written = r.s.written;
  std::cout << (ok ? "PASSED: " : "FAILED (written with --force): ") << record.command
            << (written.empty() ? "" : " (wrote " + written + " instead: the optimized model was slower)")
            << fmt::format(" ({:.1f} s)\n", r.total.ms() / 1000);
  return r.finish(ok ? 0 : 3, !ok              ? "written despite failure (--force)"
                              : written.empty() ? "passed"
                                                : "passed; wrote " + written + " (the optimized model was slower)");
}

}  // namespace

int runOptimize(const OptimizeOptions& o, int argc, char** argv) {
  Run r(o);
  if (!plan(r, argc, argv)) return 0;
  load(r);
  reference(r);
  if (o.tune.tune) tune(r);
  if (!run(r)) return r.finish(3, "failed");
  exportResult(r);
  std::string verdict;
  const bool ok = verifyResult(r, verdict);
  measureStage(r.s, ok);
  return save(r, ok, verdict);
}

}  // namespace ptopt::tools
