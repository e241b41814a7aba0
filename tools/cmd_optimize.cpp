// `ptopt IN.pt OUT.pt`: load, import, run the pipeline, export, verify, save.
//
// Order of work, so that bad input fails before anything slow happens and
// nothing is written unless everything succeeded:
//   1. the pipeline and the paths are checked (exit 2);
//   2. the model is loaded and imported (exit 2 for files that are not
//      TorchScript);
//   3. verification inputs are planned and the reference runs on them once
//      (a shape that does not fit is exit 2, naming the inputs);
//   4. the passes run (with --verify-each each changing pass is checked
//      against the cached reference outputs and the first one that breaks
//      tolerance is named);
//   5. the result is exported, verified (exit 3 on failure, nothing written
//      unless --force), saved atomically, and summarized.
#include "tools/api.h"
#include "tools/commands.h"
#include "tools/dot_dir.h"
#include "tools/op_table.h"
#include "tools/report.h"
#include "tools/util.h"
#include "tools/verify_setup.h"

#include "ir/model.h"
#include "ir/text.h"
#include "quant/precision_check.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace ptopt::tools {

namespace {

// Removes every execution of pass `name` (also inside fixpoints).
void dropPass(std::vector<rewriters::PipelineElement>& elements, const std::string& name) {
  elements.erase(std::remove_if(elements.begin(), elements.end(),
                                [&](const rewriters::PipelineElement& e) { return e.name == name; }),
                 elements.end());
  for (auto& e : elements) dropPass(e.children, name);
}

}  // namespace

void registerOptimizeOptions(CLI::App& app, OptimizeOptions& o) {
  app.add_option("input", o.input, "TorchScript model to optimize (never modified)");
  app.add_option("output", o.output, "Where to write the optimized model");
  app.add_option("--passes", o.passes, "Pipeline, e.g. 'canonicalize,fixpoint{max-iter=3}(cse,dce)'")
      ->each([&o](const std::string&) { o.passesGiven = true; });
  app.add_option("-O", o.preset, "Preset pipeline -O0..-O3 (default -O1)")->check(CLI::IsMember({"0", "1", "2", "3"}));
  app.add_option("--pipeline-file", o.pipelineFile, "Pipeline from a file (same syntax, newlines and # comments)");
  app.add_option("--rules", o.rulesFiles, "Rule file to apply after the pipeline (repeatable)");
  app.add_flag("--print-pipeline", o.printPipeline, "Print the canonical pipeline");
  app.add_option("--preserve-methods", o.preserveMethods, "Methods besides forward to keep")->delimiter(',');
  registerVerifyCliOptions(app, o.verify);
  app.add_flag("--no-verify", o.noVerify, "Skip numerics verification");
  app.add_flag("--verify", o.verifyFlag, "Verify numerics (the default; fails when no inputs can be built)");
  app.add_flag("--verify-each", o.verifyEach,
               "Verify numerics after every pass that changed the model and name the first that breaks tolerance "
               "(also lints the IR)");
  app.add_flag("--force", o.force, "Write OUT even when verification fails");
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

bool pipelineUses(const std::vector<rewriters::PipelineElement>& elements, const std::string& pass) {
  for (const auto& e : elements)
    if (e.name == pass || pipelineUses(e.children, pass)) return true;
  return false;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read pipeline file '" + path + "' (check the path and its permissions)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The pipeline the options ask for (validated before anything is loaded).
rewriters::Pipeline pipelineFromOptions(const OptimizeOptions& o) {
  const int sources = (o.passesGiven ? 1 : 0) + (!o.preset.empty() ? 1 : 0) + (!o.pipelineFile.empty() ? 1 : 0);
  if (sources > 1) throw UsageError("give only one of --passes, -O<level> and --pipeline-file");
  std::string text, source;
  if (o.passesGiven) { text = o.passes; source = "--passes"; }
  else if (!o.pipelineFile.empty()) { text = readFile(o.pipelineFile); source = o.pipelineFile; }
  else { text = rewriters::presetPipeline(o.preset.empty() ? 1 : std::stoi(o.preset)); source = "-O" + (o.preset.empty() ? std::string("1") : o.preset); }
  rewriters::Pipeline p = rewriters::parsePipeline(text, defaultRegistry(), source);
  for (const auto& rules : o.rulesFiles) {
    std::ifstream probe(rules);
    if (!probe) throw UsageError("cannot read rule file '" + rules + "' (check the path and its permissions)");
    rewriters::PipelineElement e;
    e.name = "rules";
    e.options = {{"file", rules}};
    p.elements.push_back(e);
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

// --verify-each found the first pass that breaks tolerance.
struct PassBlame : std::runtime_error {
  PassBlame(std::string what, verify::VerifyReport r) : std::runtime_error(std::move(what)), report(std::move(r)) {}
  verify::VerifyReport report;
};

}  // namespace

int runOptimize(const OptimizeOptions& o, int argc, char** argv) {
  namespace fs = std::filesystem;
  RunRecord record;
  for (int i = 0; i < argc; ++i) record.command += (i ? " " : "") + std::string(argv[i]);
  auto finishReport = [&](int code, const std::string& outcome) {
    record.exitCode = code;
    record.outcome = outcome;
    if (!o.reportPath.empty()) writeReport(record, o.reportPath);
    return code;
  };

  rewriters::Pipeline pipeline;
  try {
    pipeline = pipelineFromOptions(o);
  } catch (const rewriters::PipelineError& e) {
    throw UsageError(std::string("invalid pipeline: ") + e.what());
  }
  const std::string canonical = rewriters::printPipeline(pipeline);
  record.pipeline = canonical;
  if (o.printPipeline) {
    std::cout << canonical << "\n";
    if (o.input.empty() && o.output.empty()) return 0;
  }
  if (o.input.empty() || o.output.empty())
    throw UsageError("expected IN.pt OUT.pt (or a subcommand: show, verify, passes); see --help");
  if (o.noVerify && (o.verifyFlag || o.verifyEach)) throw UsageError("--no-verify contradicts --verify/--verify-each");
  checkOutputPath(o);
  record.input = o.input;
  record.output = o.output;
  c10::Device device = c10::kCPU;
  try {
    device = verify::resolveDevice(o.verify.device);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  record.device = verify::describeDevice(device);
  const bool tty = ::isatty(STDOUT_FILENO) != 0;

  auto say = [&](const std::string& s) { if (!o.quiet) std::cout << s << std::flush; };
  Stopwatch total, sw;
  torch::jit::Module loaded = ir::loadTorchScript(o.input);
  record.stageMs["load"] = sw.ms();
  record.inputFileBytes = fs::file_size(o.input);
  sw.reset();
  Optimizer opt = Optimizer::fromModule(loaded, ir::ImportOptions{o.preserveMethods});
  record.stageMs["import"] = sw.ms();
  record.opsBefore = countOps(opt.model().forward());
  record.parameterBytesBefore = parameterBytes(opt.model());
  const size_t nodesBefore = opt.model().forward().numNodes();
  say(fmt::format("loaded {}: {} nodes, {} constants ({:.0f} ms)\n", o.input, nodesBefore,
                  opt.model().constants->size(), record.stageMs["load"] + record.stageMs["import"]));

  // ptopt optimizes for inference. A scripted model saved in training mode
  // was put in eval mode by the import (its `self.training` reads are False),
  // so it is verified against the original in eval mode. A model traced in
  // training mode bakes dropout and batch-norm training flags in as literals;
  // a pipeline that specializes them for inference changes its outputs on
  // purpose, so it is verified against the same weights in eval semantics:
  // the import with only those two passes applied.
  // Verification moves the reference to the device; the CPU needs no copy.
  const ir::TrainingMode& mode = opt.trainingMode();
  record.mode = mode;
  if (mode.inTraining() && o.keepTraining)
    throw ir::InputError(fmt::format(
        "{} is in training mode ({}), and --keep-training refuses to optimize it for inference; save it after "
        "model.eval() (or trace it in eval mode), or drop --keep-training to optimize it in eval semantics",
        o.input, mode.scriptedInTraining ? "scripted and saved with training=True" : "traced in training mode"));
  const bool specializesTraced = mode.tracedInTraining && (pipelineUses(pipeline.elements, "remove-dropout") ||
                                                           pipelineUses(pipeline.elements, "bn-inference"));
  record.evalSemantics = mode.scriptedInTraining || specializesTraced;
  torch::jit::Module reference = device.is_cuda() ? opt.original().clone() : opt.original();
  if (specializesTraced) {
    ir::Model evalModel = opt.model().clone();
    rewriters::PassContext refCtx;
    rewriters::PassManager(defaultRegistry(), rewriters::parsePipeline("remove-dropout,bn-inference", defaultRegistry()))
        .run(evalModel, refCtx);
    reference = ir::exportModel(evalModel);
  }
  record.modeNotes = mode.notes(specializesTraced);
  for (const std::string& note : record.modeNotes) say("note: " + note + "\n");

  // Verification inputs, and the reference outputs on them (computed once).
  std::optional<verify::ReferenceRunner> runner;
  rewriters::PassContext ctx;
  ctx.targetDevice = o.target != "auto" ? o.target : device.is_cuda() ? "cuda" : "cpu";
  if (o.explain) ctx.explain = &std::cout;
  ctx.preferBf16 = o.preferBf16;
  const c10::ScalarType precision =
      quant::lowestPrecisionIntroduced(pipeline, ctx).value_or(c10::ScalarType::Float);
  const verify::ToleranceSet tolerances = tolerancesFrom(o.verify, verify::Tolerance::forPrecision(precision));
  InputPlan plan = planInputs(o.verify, opt.model().forward());
  if (!plan.source) {
    record.verificationSkipped = plan.message;
    if (o.verifyFlag || o.verifyEach) throw UsageError(plan.message);
    if (!o.noVerify) std::cerr << "ptopt: warning: " << plan.message << "\n";
  } else if (!o.noVerify) {
    if (plan.inferred) say("note: " + plan.message + "\n");
    try {
      sw.reset();
      runner.emplace(reference, *plan.source, tolerances, device, verify::inputNames(opt.model().forward()));
      record.stageMs["reference"] = sw.ms();
    } catch (const verify::ReferenceError& e) {
      if (!plan.inferred) throw ir::InputError(e.what());
      // An assumption that does not fit is not the user's error.
      record.verificationSkipped = "the assumed input shape does not fit the model; give --input-shape to verify";
      if (!o.noVerify) std::cerr << "ptopt: warning: verification skipped: " << record.verificationSkipped << "\n";
      runner.reset();
    }
  }
  // Passes may use concrete inputs (shape-prop), but only ones the user gave;
  // with --no-verify they are still checked against the model once (exit 2).
  if (plan.source && !plan.inferred) {
    if (o.noVerify) {
      verify::InputSource once = *plan.source;
      once.iterations = 1;
      try {
        verify::ReferenceRunner(reference, once, tolerances, device, verify::inputNames(opt.model().forward()));
      } catch (const verify::ReferenceError& e) {
        throw ir::InputError(e.what());
      }
    }
    ctx.exampleInputs = plan.source->inputsFor(0);
  }
  if (o.noVerify) record.verificationSkipped = "--no-verify";
  const bool verifying = runner && !o.noVerify;

  rewriters::Instrumentation inst;
  inst.printAfterAll = o.printAfterAll;
  inst.printChanged = o.printChanged;
  inst.wantChanges = !o.dotDir.empty();
  inst.verifyEach = o.verifyEach;
  inst.bisectLimit = o.bisectLimit;
  inst.out = &std::cout;
  Progress progress(o.progress || (::isatty(STDERR_FILENO) != 0 && !o.quiet));
  inst.onPassStart = [&](const std::string& pass, size_t execution) { progress.start(pass, execution); };
  if (o.verifyEach && verifying) {
    inst.onPassEnd = [&](const rewriters::PassExecution& exec, const ir::Graph&) {
      if (!exec.changed || record.blamedPass) return;
      verify::VerifyReport r = runner->check(opt.exportModule());
      if (r.passed) return;
      const std::string blame = fmt::format("{} (execution {}, method {})", exec.pass, exec.index, exec.method);
      record.blamedPass = blame;
      progress.finish();
      std::cout << fmt::format("verify-each: pass '{}' broke tolerance: {}\n{}", blame, r.verdict(), r.failureReport());
      if (!o.force) throw PassBlame(blame, std::move(r));
    };
  }
  std::unique_ptr<DotDirRecorder> drawings;
  if (!o.dotDir.empty()) {
    drawings = std::make_unique<DotDirRecorder>(o.dotDir, opt.model().forward(), fs::path(o.input).filename().string());
    auto verifyAfterPass = inst.onPassEnd;
    inst.onPassEnd = [&, verifyAfterPass](const rewriters::PassExecution& e, const ir::Graph& g) {
      drawings->afterPass(e, g);
      if (verifyAfterPass) verifyAfterPass(e, g);
    };
  }
  rewriters::RunReport report;
  sw.reset();
  try {
    report = opt.run(pipeline, &ctx, inst);
  } catch (const PassBlame& blame) {
    progress.finish();
    record.stageMs["passes"] = sw.ms();
    record.verification = blame.report;
    std::cout << "FAILED: nothing written (the first pass that breaks tolerance is " << blame.what()
              << "; use --force to write anyway): " << record.command << "\n";
    return finishReport(3, "failed");
  }
  progress.finish();
  if (drawings) say(drawings->finish(opt.model().forward()));
  record.stageMs["passes"] = sw.ms();
  record.passes = report;
  say(fmt::format("pipeline: {}\n", canonical.empty() ? "(empty)" : canonical));
  if (!report.countersSummary().empty()) say(report.countersSummary());
  // Lower precision: a changed signature takes converted inputs; fp16 cannot
  // run on a CPU with LibTorch 1.13, so there it is checked by emulation.
  const auto lowp = quant::lowPrecisionRun(pipeline, ctx, report);
  if (lowp && lowp->signatureChanged) say("note: " + lowp->signatureNote() + "\n");
  if (runner && lowp && lowp->signatureChanged)
    runner->inputAdapter = [lowp](std::vector<c10::IValue> in) { return lowp->adaptInputs(std::move(in)); };

  sw.reset();
  // What is verified is the module loaded back from the very bytes that are
  // written: an in-memory export shares class types with the original and
  // may behave differently from a fresh load (objects, defaults).
  std::string bytes;
  torch::jit::Module exported;
  double serializeMs = 0;  // counted as part of "save"
  try {
    exported = opt.exportModule();
    record.stageMs["export"] = sw.ms();
    sw.reset();
    bytes = ir::serializeModule(exported);
    exported = ir::loadSerializedModule(bytes);
    serializeMs = sw.ms();
  } catch (const std::exception& e) {
    throw std::runtime_error("the optimized model does not serialize and load back: " + ir::torchErrorMessage(e) +
                             "\n(a ptopt bug: please report it with the model; --passes '' shows whether a pass is the cause)");
  }
  if (const size_t nodes = opt.model().forward().numNodes(); nodes > 20000)
    say(fmt::format("note: {} nodes in one graph: LibTorch's executor recurses about once per node on a graph's first "
                    "run, which can overflow a default 8 MiB stack (ptopt runs on a 1 GiB one). Run the model on a "
                    "thread with a larger stack (Python: threading.stack_size(1 << 30)) or raise `ulimit -s`.\n",
                    nodes));
  record.opsAfter = countOps(opt.model().forward());
  record.parameterBytesAfter = parameterBytes(opt.model());

  bool ok = true;
  std::string verdict = o.noVerify ? "skipped (--no-verify)" : "skipped (" + record.verificationSkipped + ")";
  if (verifying) {
    sw.reset();
    const bool emulateFp16 = lowp && lowp->dtype == c10::ScalarType::Half && !device.is_cuda();
    const bool cudaOnCpu = ctx.targetDevice == "cuda" && !device.is_cuda();
    verify::VerifyReport v;
    if (emulateFp16 || cudaOnCpu) {
      // A CPU stand-in: the same pipeline on a fresh import of the original,
      // with emulated casts (fp16 rounding, fp32 compute) and without the
      // CUDA-only fusions (exact rewrites to cuDNN kernels a CPU cannot run).
      Optimizer standIn = Optimizer::fromModule(opt.original(), ir::ImportOptions{o.preserveMethods});
      rewriters::PassContext standInCtx;
      standInCtx.targetDevice = ctx.targetDevice;
      standInCtx.preferBf16 = ctx.preferBf16;
      standInCtx.exampleInputs = ctx.exampleInputs;
      rewriters::Pipeline standInPipeline = quant::withEmulatedCasts(pipeline);
      if (cudaOnCpu) dropPass(standInPipeline.elements, "fuse-cudnn");
      standIn.run(standInPipeline, &standInCtx);
      if (emulateFp16)
        runner->notes.push_back("fp16 checked by emulation on the CPU (fp16 rounding at every cast, fp32 compute): "
                                "LibTorch cannot run fp16 convolutions on a CPU");
      if (cudaOnCpu && ir::requiresCuda(opt.model()))
        runner->notes.push_back("the model is for CUDA: its cuDNN fusions (fuse-cudnn) were left out of the CPU "
                                "check; run `ptopt verify` on a CUDA machine for the file itself");
      v = runner->check(standIn.exportModule());
    } else {
      v = runner->check(exported);
    }
    for (const auto& note : v.notes) say("note: " + note + "\n");
    record.stageMs["verify"] = sw.ms();
    ok = v.passed && !record.blamedPass;
    verdict = v.verdict();
    if (!v.passed) verdict += "\n" + v.failureReport();
    else if (o.verbose && !v.iterations.empty()) verdict += "\n" + v.iterations.front().comparison.summary();
    warnUnknownOutputs(tolerances, v);
    record.verification = std::move(v);
  }
  if (!ok && !o.force) {
    std::cout << "verification: " << verdict;
    if (verdict.back() != '\n') std::cout << "\n";
    std::cout << "FAILED: nothing written (use --force to write anyway): " << record.command << "\n";
    return finishReport(3, "failed");
  }
  sw.reset();
  try {
    ir::writeModuleBytesAtomically(bytes, o.output, /*reload=*/false);  // loaded back above
  } catch (const std::exception& e) {
    throw WriteError(e.what());
  }
  record.stageMs["save"] = serializeMs + sw.ms();  // serialize + load back, then write
  record.outputFileBytes = fs::file_size(o.output);

  // The summary.
  if (!o.quiet) {
    std::cout << formatOpTable(record.opsBefore, &record.opsAfter, tty);
    std::cout << fmt::format("nodes {} -> {}; parameters {} -> {}; file {} -> {} ({})\n", nodesBefore,
                             opt.model().forward().numNodes(), formatBytes(double(record.parameterBytesBefore)),
                             formatBytes(double(record.parameterBytesAfter)), formatBytes(double(*record.inputFileBytes)),
                             formatBytes(double(*record.outputFileBytes)), o.output);
    std::cout << report.timingTable();
    if (record.evalSemantics)
      std::cout << fmt::format("mode: {} in training mode; optimized and verified in eval semantics "
                               "(--keep-training refuses instead)\n",
                               mode.scriptedInTraining ? "scripted and saved" : "traced");
    std::cout << fmt::format("time: load {:.0f} ms, import {:.0f} ms, passes {:.0f} ms, export {:.0f} ms, verify {:.0f} ms, "
                             "save {:.0f} ms\n",
                             record.stageMs["load"], record.stageMs["import"], record.stageMs["passes"],
                             record.stageMs["export"], record.stageMs["verify"], record.stageMs["save"]);
  } else if (o.timePasses) {
    std::cout << report.timingTable();
  }
  say("verification: " + verdict + (verdict.back() == '\n' ? "" : "\n"));
  std::cout << (ok ? "PASSED: " : "FAILED (written with --force): ") << record.command
            << fmt::format(" ({:.1f} s)\n", total.ms() / 1000);
  return finishReport(ok ? 0 : 3, ok ? "passed" : "written despite failure (--force)");
}

}  // namespace ptopt::tools
