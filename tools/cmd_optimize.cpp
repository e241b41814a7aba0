// `ptopt IN.pt OUT.pt`: load, import, run the pipeline, export, verify, save.
#include "tools/api.h"
#include "tools/commands.h"
#include "tools/op_table.h"
#include "tools/util.h"

#include "ir/model.h"
#include "ir/text.h"
#include "quant/precision_check.h"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <sstream>

namespace ptopt::tools {

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
  app.add_option("--input-shape", o.inputShapes, "One per model input: 1,3,224,224 | name:1,3,224,224 | 2,7:int64");
  app.add_option("--seed", o.seed, "Seed for verification inputs");
  app.add_option("--verify-iters", o.verifyIters, "Seeded verification runs")->check(CLI::PositiveNumber);
  app.add_option("--rtol", o.rtol, "Relative tolerance for verification");
  app.add_option("--atol", o.atol, "Absolute tolerance for verification");
  app.add_flag("--no-verify", o.noVerify, "Skip numerics verification");
  app.add_flag("--force", o.force, "Write OUT even when verification fails");
  app.add_flag("--overwrite", o.overwrite, "Replace OUT if it exists");
  app.add_flag("--print-after-all", o.printAfterAll, "Print the IR after every pass");
  app.add_flag("--print-changed", o.printChanged, "Print a diff of the IR after every pass that changed it");
  app.add_flag("--time-passes", o.timePasses, "Print a table of time per pass");
  app.add_option("--bisect-limit", o.bisectLimit, "Run only the first N pass executions");
  app.add_flag("--verify-each", o.verifyEach, "Lint the IR before and after every pass");
  app.add_flag("--explain", o.explain, "Print why passes declined rewrites");
  app.add_flag("--prefer-bf16", o.preferBf16, "-O3 / cast{dtype=auto}: bf16 on CUDA targets too");
  app.add_flag("-q,--quiet", o.quiet, "Print only errors and the final line");
  app.add_flag("-v,--verbose", o.verbose, "Print more detail");
}

namespace {

bool hasTrainingModeLiterals(const ir::Model& model) {
  bool found = false;
  for (const auto& [name, graph] : model.methods)
    graph->walk([&](ir::Node* n) {
      auto literalTrue = [&](size_t i) {
        return i < n->numArgs() && n->arg(i).isLiteral() && n->arg(i).literal() == ir::Literal(true);
      };
      if ((n->is("aten::batch_norm") && literalTrue(5)) ||
          (n->isCall() && n->target().find("dropout") != std::string::npos && literalTrue(2)))
        found = true;
    });
  return found;
}

bool pipelineUses(const std::vector<rewriters::PipelineElement>& elements, const std::string& pass) {
  for (const auto& e : elements)
    if (e.name == pass || pipelineUses(e.children, pass)) return true;
  return false;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read pipeline file '" + path + "'");
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
    rewriters::PipelineElement e;
    e.name = "rules";
    e.options = {{"file", rules}};
    p.elements.push_back(e);
  }
  return p;
}

}  // namespace

int runOptimize(const OptimizeOptions& o, int argc, char** argv) {
  namespace fs = std::filesystem;
  rewriters::Pipeline pipeline;
  try {
    pipeline = pipelineFromOptions(o);
  } catch (const rewriters::PipelineError& e) {
    throw UsageError(std::string("invalid pipeline: ") + e.what());
  }
  const std::string canonical = rewriters::printPipeline(pipeline);
  if (o.printPipeline) {
    std::cout << canonical << "\n";
    if (o.input.empty() && o.output.empty()) return 0;
  }
  if (o.input.empty() || o.output.empty())
    throw UsageError("expected IN.pt OUT.pt (or a subcommand: show, passes); see --help");
  if (fs::exists(o.output) && sameFile(o.input, o.output))
    throw UsageError("OUT '" + o.output + "' is the input file itself; choose another output path");
  if (fs::exists(o.output) && !o.overwrite)
    throw UsageError("'" + o.output + "' exists; pass --overwrite to replace it");

  std::vector<verify::InputSpec> specs;
  for (const auto& s : o.inputShapes) {
    try {
      specs.push_back(verify::parseInputSpec(s));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }

  auto say = [&](const std::string& s) { if (!o.quiet) std::cout << s << std::flush; };
  Stopwatch total, sw;
  torch::jit::Module loaded = ir::loadTorchScript(o.input);
  const double loadMs = sw.ms();
  sw.reset();
  Optimizer opt = Optimizer::fromModule(loaded, ir::ImportOptions{o.preserveMethods});
  const double importMs = sw.ms();
  const auto opsBefore = countOps(opt.model().forward());
  const size_t nodesBefore = opt.model().forward().numNodes();
  say(fmt::format("loaded {}: {} nodes, {} constants ({:.0f} ms)\n", o.input, nodesBefore,
                  opt.model().constants->size(), loadMs + importMs));

  // A model traced in training mode bakes dropout and batch-norm training
  // flags in as literals. A pipeline that specializes them for inference
  // changes its outputs on purpose, so it is verified against the same
  // weights in eval semantics: the import with only those two passes applied.
  torch::jit::Module reference = opt.original();
  std::string referenceNote = "the original model";
  if (hasTrainingModeLiterals(opt.model()) &&
      (pipelineUses(pipeline.elements, "remove-dropout") || pipelineUses(pipeline.elements, "bn-inference"))) {
    ir::Model evalModel = opt.model().clone();
    rewriters::PassContext refCtx;
    rewriters::PassManager(defaultRegistry(), rewriters::parsePipeline("remove-dropout,bn-inference", defaultRegistry()))
        .run(evalModel, refCtx);
    reference = ir::exportModel(evalModel);
    referenceNote = "the original in eval semantics (it was traced in training mode: its dropout and batch_norm "
                    "training flags are replaced by their inference forms)";
    say("note: verifying against " + referenceNote + "\n");
  }

  rewriters::PassContext ctx;
  if (o.explain) ctx.explain = &std::cout;
  ctx.preferBf16 = o.preferBf16;
  if (!specs.empty()) {
    try {
      ctx.exampleInputs = verify::makeInputs(specs, o.seed);
    } catch (const std::exception& e) {
      throw UsageError(std::string("cannot build inputs from --input-shape: ") + e.what());
    }
    // A shape that does not fit the model is bad input (exit 2), found
    // before any pass runs on it.
    try {
      torch::NoGradGuard noGrad;
      torch::manual_seed(o.seed);
      reference.forward(verify::cloneInputs(*ctx.exampleInputs));
    } catch (const std::exception& e) {
      throw ir::InputError("the original model fails on the given --input-shape (" + std::to_string(specs.size()) +
                           " input(s) for " + std::to_string(opt.model().forward().inputs().size()) +
                           " model input(s)): " + ir::torchErrorMessage(e));
    }
  }
  rewriters::Instrumentation inst;
  inst.printAfterAll = o.printAfterAll;
  inst.printChanged = o.printChanged;
  inst.verifyEach = o.verifyEach;
  inst.bisectLimit = o.bisectLimit;
  inst.out = &std::cout;
  sw.reset();
  rewriters::RunReport report = opt.run(pipeline, &ctx, inst);
  const double passesMs = sw.ms();
  say(fmt::format("pipeline: {}\n", canonical.empty() ? "(empty)" : canonical));
  if (!report.countersSummary().empty()) say(report.countersSummary());
  if (o.timePasses) std::cout << report.timingTable();
  // Lower precision is verified with its dtype's criterion (quant/precision_check.h).
  const auto lowp = quant::lowPrecisionRun(pipeline, ctx, report);
  if (lowp && lowp->signatureChanged) say("note: " + lowp->signatureNote() + "\n");

  sw.reset();
  torch::jit::Module exported = opt.exportModule();
  const double exportMs = sw.ms();

  std::string verdict = "skipped (give --input-shape to verify)";
  if (o.noVerify) verdict = "skipped (--no-verify)";
  bool ok = true;
  if (!o.noVerify && !specs.empty()) {
    verify::Tolerance tol;
    if (o.rtol) tol.rtol = *o.rtol;
    if (o.atol) tol.atol = *o.atol;
    bool bitwise = true;
    torch::NoGradGuard noGrad;
    for (int iter = 0; iter < o.verifyIters && ok; ++iter) {
      const uint64_t seed = o.seed + static_cast<uint64_t>(iter);
      auto inputs = verify::makeInputs(specs, seed);
      c10::IValue expected;
      try {
        torch::manual_seed(seed);
        expected = reference.forward(verify::cloneInputs(inputs));
      } catch (const std::exception& e) {
        throw ir::InputError("the original model fails on the given --input-shape: " + ir::torchErrorMessage(e));
      }
      torch::manual_seed(seed);
      c10::IValue actual = exported.forward(lowp ? lowp->adaptInputs(verify::cloneInputs(inputs)) : verify::cloneInputs(inputs));
      if (lowp && !o.rtol && !o.atol) {
        auto check = quant::checkLowPrecision(actual, expected, lowp->tolerance);
        bitwise = false;
        if (!check.passed) verdict = fmt::format("FAILED (seed {}, {}):\n{}", seed, lowp->criterion(), check.summary);
        else if (o.verbose) say(check.summary);
        ok = check.passed;
        continue;
      }
      auto cmp = verify::compareOutputs(actual, expected, tol);
      bitwise = bitwise && cmp.bitwiseEqual();
      if (!cmp.withinTolerance()) {
        ok = false;
        verdict = fmt::format("FAILED (seed {}, rtol {:g}, atol {:g}):\n{}", seed, tol.rtol, tol.atol, cmp.summary());
      } else if (o.verbose) {
        say(cmp.summary());
      }
    }
    if (ok && lowp && !o.rtol && !o.atol)
      verdict = fmt::format("passed the {} ({} seeded runs)", lowp->criterion(), o.verifyIters);
    else if (ok)
      verdict = fmt::format("{} ({} seeded runs, rtol {:g}, atol {:g})",
                            bitwise ? "passed, bitwise equal" : "passed within tolerance", o.verifyIters, tol.rtol, tol.atol);
  }
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  if (!ok && !o.force) {
    std::cout << "verification: " << verdict;
    std::cout << "FAILED: nothing written (use --force to write anyway): " << cmd << "\n";
    return 3;
  }
  sw.reset();
  ir::saveModuleAtomically(exported, o.output);
  const double saveMs = sw.ms();
  const auto opsAfter = countOps(opt.model().forward());
  if (!o.quiet) std::cout << formatOpTable(opsBefore, &opsAfter);
  say(fmt::format("nodes {} -> {}; wrote {} ({})\n", nodesBefore, opt.model().forward().numNodes(), o.output,
                  formatBytes(static_cast<double>(fs::file_size(o.output)))));
  say(fmt::format("timing: load={:.1f}ms import={:.1f}ms passes={:.1f}ms export={:.1f}ms save={:.1f}ms\n",
                  loadMs, importMs, passesMs, exportMs, saveMs));
  say("verification: " + verdict + "\n");
  std::cout << (ok ? "PASSED: " : "FAILED (written with --force): ") << cmd
            << fmt::format(" ({:.1f} s)\n", total.ms() / 1000);
  return ok ? 0 : 3;
}

}  // namespace ptopt::tools
