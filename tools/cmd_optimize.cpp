// `ptopt IN.pt OUT.pt`: the command line's face of the driver
// (driver/driver.h), which runs the whole optimization: plan, load,
// reference, calibrate, tune, run, export, verify, measure, save. Here the
// flags become one driver::Request, the run's account is printed (lines on
// stdout, not with -q; warnings on stderr; per-pass progress; --dot-dir's
// drawings), and the outcome becomes the exit code and the --report file:
//   0  written and verified (or verification skipped, with a warning);
//   2  a bad command line or bad input (nothing written);
//   3  verification failed (nothing written unless --force; with
//      --verify-each, the first pass that breaks tolerance is named);
//   1  anything else (a failed write, a pass that throws).
#include "api/api.h"
#include "tools/commands.h"
#include "tools/dot_dir.h"
#include "driver/driver.h"
#include "driver/op_table.h"
#include "driver/request_options.h"
#include "driver/report.h"
#include "driver/util.h"
#include "tools/verify_setup.h"

#include "ir/model.h"
#include "quant/calibration.h"
#include "verify/precision.h"
#include "quant/quantize_report.h"
#include "target/capabilities.h"
#include "verify/blame.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/cuda.h>

#include <filesystem>
#include <fmt/format.h>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <system_error>
#include <unistd.h>

namespace ptopt::tools {

void registerOptimizeOptions(CLI::App& app, OptimizeOptions& o) {
  // Positionals are not config-file options: CLI11 2.4 on refuses a
  // subcommand option (dot's --output) that a configurable positional of the
  // top-level app shares its name with.
  app.add_option("input", o.input, "Model to optimize: a TorchScript file or a torch.export .pt2 (never modified)")->configurable(false);
  app.add_option("output", o.output, "Where to write the optimized model")->configurable(false);
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
                 "--calibration; an accuracy guard keeps sensitive ops fp32) to the pipeline; bf16, fp16, auto: "
                 "the pipeline computes in that float precision (its precision pass added, or set to it)")
      ->check(CLI::IsMember({"int8", "bf16", "fp16", "auto"}));
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
  app.add_option("--to", o.to,
                 "OUT's format: torchscript (torch.jit.load) or pt2 (a torch.export program, torch.export.load; "
                 "PyTorch 2.x builds). Default: pt2 when OUT ends in .pt2, else IN's format")
      ->check(CLI::IsMember({"torchscript", "pt2"}));
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
  app.add_option("--measure-threads", o.measureThreads, "Intra-op threads while timing (default: the first --tune-threads count with --tune, else 1)")
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
// An environment switch: set, and not "0".
bool envSwitch(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read pipeline file '" + path + "' (check the path and its permissions)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

// The flags as the driver's request (the pipeline's sources checked here:
// one of --passes, -O, --pipeline-file).
driver::Request requestFrom(const OptimizeOptions& o) {
  driver::Request req;
  req.input = o.input;
  req.output = o.output;
  req.overwrite = o.overwrite;
  req.inPlace = o.inPlace;
  if (!o.to.empty()) req.to = ir::parseModelFormat(o.to);
  req.importOptions = ir::ImportOptions{o.preserveMethods};
  const int sources = (o.passesGiven ? 1 : 0) + (!o.preset.empty() ? 1 : 0) + (!o.pipelineFile.empty() ? 1 : 0);
  if (sources > 1) throw UsageError("give only one of --passes, -O<level> and --pipeline-file");
  if (o.passesGiven) {
    req.pipeline = o.passes;
  } else if (!o.pipelineFile.empty()) {
    req.pipeline = readFile(o.pipelineFile);
    req.pipelineSource = o.pipelineFile;
  } else {
    req.pipeline = "-O" + (o.preset.empty() ? std::string("1") : o.preset);
  }
  req.ruleFiles = o.rulesFiles;
  req.quantize = o.quantize;
  req.calibrationFile = o.calibration;
  req.inputs = inputRequest(o.verify);
  if (o.noVerify && (o.verifyFlag || o.verifyEach)) throw UsageError("--no-verify contradicts --verify/--verify-each");
  req.verification = o.noVerify                     ? driver::Verification::Off
                     : o.verifyFlag || o.verifyEach ? driver::Verification::Required
                                                    : driver::Verification::WhenPossible;
  req.tolerances = toleranceOverrides(o.verify);
  req.device = o.verify.device;
  req.preferBf16 = o.preferBf16;
  req.assumeIsa = o.assumeIsa;
  // The flags the user may leave out, onto the request by the names of the
  // one option table (driver/request_options.h, Python's keywords): what is
  // not given keeps driver::Request's default.
  nlohmann::json given = nlohmann::json::object();
  if (o.target) given["target"] = *o.target;
  if (o.measureBudget) given["measure_budget"] = *o.measureBudget;
  if (o.measureThreads) given["measure_threads"] = *o.measureThreads;
  if (!o.tune.threads.empty()) given["tune_threads"] = o.tune.threads;
  try {
    driver::setRequestOptions(req, given);
  } catch (const driver::RequestError& e) {  // a flag's value the option table refuses (--tune-threads 0)
    throw UsageError(e.what());
  }
  req.keepTraining = o.keepTraining;
  req.tune = o.tune.tune;
  if (!req.tune && !req.tuneThreads.empty()) throw UsageError("--tune-threads is for --tune: add --tune, or drop it");
  req.tuneBudgetSeconds = o.tune.budgetSeconds;
  req.tuningCache = o.tune.cachePath;
  // The two environment switches, read here by the front end only (the
  // library takes them as request options): PTOPT_REPRODUCIBLE_CLOCK=1 is
  // --reproducible-clock, PTOPT_NO_MEASURE=1 is --no-measure (the test
  // suite sets it where a structure check must not depend on timing).
  req.reproducibleClock = o.tune.reproducibleClock || envSwitch("PTOPT_REPRODUCIBLE_CLOCK");
  req.measure = !o.noMeasure && !envSwitch("PTOPT_NO_MEASURE");
  req.force = o.force;
  // The untimed work on every physical core, unless the user sized the
  // thread pool (LibTorch reads these variables).
  req.workThreads = driver::untimedWorkThreads();
  req.explain = o.explain;
  req.describeTarget = o.verbose;
  req.printAfterAll = o.printAfterAll;
  req.printChanged = o.printChanged;
  req.verifyEach = o.verifyEach;
  req.bisectLimit = o.bisectLimit;
  return req;
}

// The closing summary: op table, sizes, pass times, stage times (-q: only
// the pass times with --time-passes).
void printSummary(const OptimizeOptions& o, const driver::Outcome& out) {
  const RunRecord& rec = out.record;
  if (o.quiet) {
    if (o.timePasses && rec.passes) std::cout << rec.passes->timingTable();
    return;
  }
  auto ms = [&rec](const char* stage) {  // a stage that did not run: 0 (in --report too)
    auto it = rec.stageMs.find(stage);
    return it == rec.stageMs.end() ? 0.0 : it->second;
  };
  std::cout << formatOpTable(rec.opsBefore, &rec.opsAfter, ::isatty(STDOUT_FILENO) != 0);
  std::cout << fmt::format("nodes {} -> {}; parameters {} -> {}; file {} -> {} ({})\n", out.nodesBefore,
                           out.nodesAfter, formatBytes(double(rec.parameterBytesBefore)),
                           formatBytes(double(rec.parameterBytesAfter)), formatBytes(double(*rec.inputFileBytes)),
                           formatBytes(double(*rec.outputFileBytes)), o.output);
  if (rec.passes) std::cout << rec.passes->timingTable();
  std::cout << out.tuneSummary;
  if (rec.evalSemantics)
    std::cout << fmt::format("mode: {} in training mode; optimized and verified in eval semantics "
                             "(--keep-training refuses instead)\n",
                             rec.mode && rec.mode->scriptedInTraining ? "scripted and saved" : "traced");
  const auto threads = rec.sections.find("threads");
  std::cout << fmt::format("time: load {:.0f} ms, import {:.0f} ms, reference {:.0f} ms, {}passes {:.0f} ms, export "
                           "{:.0f} ms, verify {:.0f} ms, measure {:.0f} ms, save {:.0f} ms{}\n",
                           ms("load"), ms("import"), ms("reference"),
                           o.tune.tune ? fmt::format("tune {:.0f} ms, ", ms("tune")) : "", ms("passes"), ms("export"),
                           ms("verify"), ms("measure"), ms("save"),
                           threads == rec.sections.end()
                               ? ""
                               : fmt::format(" (untimed work on {} threads, LibTorch's count {})",
                                             threads->second.value("untimed_work", 0),
                                             threads->second.value("libtorch", 0)));
}

}  // namespace

int runOptimize(const OptimizeOptions& o, int argc, char** argv) {
  Stopwatch total;
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  driver::Request req = requestFrom(o);
  if (o.printPipeline) {
    try {
      std::cout << rewriters::printPipeline(driver::planPipeline(req)) << "\n";
    } catch (const rewriters::PipelineError& e) {
      throw UsageError(std::string("invalid pipeline: ") + e.what());
    }
    if (o.input.empty() && o.output.empty()) return 0;
  }
  if (o.input.empty() || o.output.empty())
    throw UsageError("expected IN.pt OUT.pt (or a subcommand: show, verify, passes); see --help");

  auto say = [&o](const std::string& line) {
    if (!o.quiet) std::cout << line << std::flush;
  };
  Progress progress(o.progress || (::isatty(STDERR_FILENO) != 0 && !o.quiet));
  std::unique_ptr<DotDirRecorder> drawings;
  driver::FrontEnd fe;
  if (!o.noMeasure && envSwitch("PTOPT_NO_MEASURE")) fe.noMeasureName = "--no-measure (PTOPT_NO_MEASURE is set)";
  fe.say = say;
  fe.note = [&say](const std::string& note) { say("note: " + note + "\n"); };
  fe.notice = [](const std::string& note) { std::cout << "note: " << note << "\n"; };
  fe.warning = [](const std::string& w) { std::cerr << "ptopt: WARNING: " << w << "\n"; };
  fe.out = &std::cout;
  fe.tuneProgress = o.quiet ? nullptr : &std::cerr;
  fe.onPassStart = [&progress](const std::string& pass, size_t execution) { progress.start(pass, execution); };
  fe.onPassesEnd = [&progress] { progress.finish(); };
  fe.blamed = [](const verify::Blame& blame) { std::cout << blame.message(); };
  if (!o.dotDir.empty()) {
    fe.beforePasses = [&](const ir::Graph& g) {
      drawings = std::make_unique<DotDirRecorder>(o.dotDir, g, std::filesystem::path(o.input).filename().string());
    };
    fe.afterPass = [&drawings](const rewriters::PassExecution& e, const ir::Graph& g) { drawings->afterPass(e, g); };
    fe.afterPasses = [&drawings](const ir::Graph& g) { return drawings->finish(g); };
  }

  driver::Outcome out;
  try {
    out = driver::optimize(req, fe);
  } catch (const rewriters::PipelineError& e) {
    throw UsageError(std::string("invalid pipeline: ") + e.what());
  } catch (const verify::InputPlanError& e) {
    throw UsageError(e.what());
  } catch (const driver::RequestError& e) {
    throw UsageError(e.what());
  }
  RunRecord& record = out.record;
  record.command = command;
  auto finish = [&](int code) {
    record.exitCode = code;
    if (!o.reportPath.empty()) writeReport(record, o.reportPath);
    return code;
  };
  if (out.blame) {
    std::cout << "FAILED: nothing written (the first pass that breaks tolerance is " << out.blame->pass
              << "; use --force to write anyway): " << command << "\n";
    return finish(3);
  }
  std::string verdict = out.verdict();
  if (out.record.verification) {
    const verify::VerifyReport& v = *out.record.verification;
    if (v.passed && o.verbose && !v.iterations.empty()) verdict += "\n" + v.iterations.front().comparison.summary();
    warnUnknownOutputs(req.tolerances.over(verify::Tolerance{}), v);
  }
  if (!out.saved) {
    std::cout << "verification: " << verdict;
    if (verdict.back() != '\n') std::cout << "\n";
    std::cout << "FAILED: nothing written (use --force to write anyway): " << command << "\n";
    return finish(3);
  }
  printSummary(o, out);
  say("verification: " + verdict + (verdict.back() == '\n' ? "" : "\n"));
  std::cout << (out.passed ? "PASSED: " : "FAILED (written with --force): ") << command
            << (out.written.empty() ? "" : " (wrote " + out.written + " instead: the optimized model was slower)")
            << fmt::format(" ({:.1f} s)\n", total.ms() / 1000);
  return finish(out.passed ? 0 : 3);
}

}  // namespace ptopt::tools
