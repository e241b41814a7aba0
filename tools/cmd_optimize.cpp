// `ptopt IN.pt OUT.pt`: load, import, run the pipeline, export, verify, save.
#include "tools/commands.h"
#include "tools/op_table.h"
#include "tools/util.h"

#include "ir/model.h"
#include "ir/text.h"
#include "verify/compare.h"
#include "verify/inputs.h"

#include <filesystem>
#include <fmt/format.h>
#include <iostream>

namespace ptopt::tools {

void registerOptimizeOptions(CLI::App& app, OptimizeOptions& o) {
  app.add_option("input", o.input, "TorchScript model to optimize (never modified)");
  app.add_option("output", o.output, "Where to write the optimized model");
  app.add_option("--passes", o.passes, "Pipeline, e.g. 'canonicalize,fixpoint{max-iter=3}(cse,dce)'");
  app.add_option("--preserve-methods", o.preserveMethods, "Methods besides forward to keep")->delimiter(',');
  app.add_option("--input-shape", o.inputShapes, "One per model input: 1,3,224,224 | name:1,3,224,224 | 2,7:int64");
  app.add_option("--seed", o.seed, "Seed for verification inputs");
  app.add_flag("--no-verify", o.noVerify, "Skip numerics verification");
  app.add_flag("--overwrite", o.overwrite, "Replace OUT if it exists");
  app.add_flag("-q,--quiet", o.quiet, "Print only errors and the final line");
  app.add_flag("-v,--verbose", o.verbose, "Print more detail");
}

int runOptimize(const OptimizeOptions& o, int argc, char** argv) {
  namespace fs = std::filesystem;
  if (o.input.empty() || o.output.empty())
    throw UsageError("expected IN.pt OUT.pt (or a subcommand: show, passes); see --help");
  if (fs::exists(o.output) && sameFile(o.input, o.output))
    throw UsageError("OUT '" + o.output + "' is the input file itself; choose another output path");
  if (fs::exists(o.output) && !o.overwrite)
    throw UsageError("'" + o.output + "' exists; pass --overwrite to replace it");
  if (!o.passes.empty() && o.passes.find_first_not_of(" \t\n") != std::string::npos)
    throw UsageError("unknown pipeline '" + o.passes + "': no passes are registered yet");

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
  torch::jit::Module original = ir::loadTorchScript(o.input);
  const double loadMs = sw.ms();
  sw.reset();
  ir::ImportOptions importOptions;
  importOptions.preserveMethods = o.preserveMethods;
  ir::Model model = ir::importModule(original, importOptions);
  const double importMs = sw.ms();
  const auto opsBefore = countOps(model.forward());
  say(fmt::format("loaded {} ({:.0f} ms), imported {} nodes, {} constants ({:.0f} ms)\n", o.input,
                  loadMs, model.forward().numNodes(), model.constants->size(), importMs));

  sw.reset();
  torch::jit::Module exported = ir::exportModel(model);
  const double exportMs = sw.ms();

  std::string verdict = "not verified (give --input-shape to verify)";
  bool ok = true;
  if (!o.noVerify && !specs.empty()) {
    original.eval();
    for (int iter = 0; iter < o.verifyIters; ++iter) {
      auto inputs = verify::makeInputs(specs, o.seed + static_cast<uint64_t>(iter));
      c10::IValue expected, actual;
      try {
        expected = original.forward(verify::cloneInputs(inputs));
      } catch (const std::exception& e) {
        throw ir::InputError("the original model fails on the given --input-shape: " + ir::torchErrorMessage(e));
      }
      actual = exported.forward(verify::cloneInputs(inputs));
      auto cmp = verify::compareOutputs(actual, expected);
      if (!cmp.withinTolerance()) {
        ok = false;
        verdict = "FAILED:\n" + cmp.summary();
        break;
      }
      verdict = cmp.bitwiseEqual() ? "bitwise equal" : "within tolerance";
    }
    verdict = fmt::format("{} ({} seeded runs)", verdict, o.verifyIters);
  }
  if (!ok) {
    std::cerr << "verification " << verdict;
    std::cout << "FAILED: nothing written\n";
    return 3;
  }
  sw.reset();
  ir::saveModuleAtomically(exported, o.output);
  const double saveMs = sw.ms();
  if (o.verbose) say(formatOpTable(opsBefore, nullptr));
  say(fmt::format("export {:.0f} ms, save {:.0f} ms; wrote {} ({})\n", exportMs, saveMs, o.output,
                  formatBytes(static_cast<double>(fs::file_size(o.output)))));
  say(fmt::format("timing: load={:.1f}ms import={:.1f}ms export={:.1f}ms save={:.1f}ms\n", loadMs, importMs, exportMs, saveMs));
  say("verification: " + verdict + "\n");
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  std::cout << "PASSED: " << cmd << " (" << fmt::format("{:.1f} s", total.ms() / 1000) << ")\n";
  return 0;
}

}  // namespace ptopt::tools
