#include "tools/verify_setup.h"

#include "tools/commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in <fmt/format.h> only before fmt 11)

#include <filesystem>
#include <iostream>

namespace ptopt::tools {

void registerVerifyCliOptions(CLI::App& app, VerifyCliOptions& o, bool comparing) {
  // The option takes several values, so before IN OUT it would swallow the
  // model paths: say so instead of "expected IN.pt OUT.pt".
  const CLI::Validator notAPath(
      [](std::string& v) -> std::string {
        std::error_code ec;
        const bool looksLikeModel = v.size() > 3 && (v.compare(v.size() - 3, 3, ".pt") == 0 || v.compare(v.size() - 3, 3, ".pth") == 0);
        if (looksLikeModel || std::filesystem::is_regular_file(v, ec))
          return "'" + v + "' is a file, not a shape: put --input-shape after IN OUT, or write --input-shape=SHAPE";
        return "";
      },
      "SHAPE");
  app.add_option("--input-shape", o.inputShapes,
                 "One per model input, in order: 1,3,224,224 | name:1,3,224,224 | 2,7:int64 | int:3 | none | "
                 "name:none. Inputs with a default may be left out; a named one goes to that input")
      ->check(notAPath);
  app.add_option("--inputs", o.inputsFile,
                 "Inputs saved from Python: torch.save([x, ...], FILE) (a tensor, list, tuple or dict by name), "
                 "or a TorchScript module whose attributes are the inputs");
  app.add_option("--int-range", o.intRange, "Integer inputs drawn from [LO,HI) (default 0,100)");
  app.add_option("--device", o.device, "Where to run the models: auto (CUDA when available), cpu, cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  if (!comparing) return;
  app.add_option("--seed", o.seed, "Seed of the first verification input set");
  app.add_option("--verify-iters", o.iterations, "Seeded input sets to compare on (default 3)")
      ->check(CLI::PositiveNumber);
  app.add_option("--verify-executor", o.executor,
                 "How LibTorch runs both models: plain (the graph's ops as written, JIT optimizer off; linear in "
                 "the graph's size) or optimizing (LibTorch's profiling executor, JIT fusers included, as "
                 "deployment runs it; its first runs re-optimize the graph, slow on very large graphs). "
                 "Default plain")
      ->check(CLI::IsMember({"plain", "optimizing"}));
  app.add_option("--rtol", o.rtol,
                 "Relative tolerance, for all outputs (1e-5) or one (out1:1e-5); repeatable. fp32 results pass "
                 "when every element has |a-b| <= atol + rtol*|b| + scale-tol*rms(b) (default rtol 1e-4); "
                 "bf16/fp16 results use the precision's global criterion");
  app.add_option("--atol", o.atol,
                 "Absolute tolerance, for all outputs (1e-6) or one (out1:1e-6); repeatable (default: 1e-5 for "
                 "fp32 results)");
  app.add_option("--scale-tol", o.scaleTol,
                 "fp32 tolerance relative to the scale of an output (the RMS of its reference values), for all "
                 "outputs or one (out1:1e-4); repeatable (default 1e-5; 0 gives the plain elementwise check)");
}

verify::InputRequest inputRequest(const VerifyCliOptions& o) {
  verify::InputRequest r;
  r.shapes = o.inputShapes;
  r.file = o.inputsFile;
  r.intRange = o.intRange;
  if (o.seed) r.seed = *o.seed;
  if (o.iterations) r.iterations = *o.iterations;
  r.executor = o.executor;
  return r;
}

InputPlan planInputs(const VerifyCliOptions& o, const ir::Graph& forward) {
  try {
    return verify::planInputs(inputRequest(o), forward);
  } catch (const verify::InputPlanError& e) {
    throw UsageError(e.what());
  }
}

driver::ToleranceOverrides toleranceOverrides(const VerifyCliOptions& o) {
  driver::ToleranceOverrides t;
  auto apply = [&](const std::vector<std::string>& given, const char* flag, std::optional<double>& global,
                   std::map<std::string, double>& perOutput) {
    for (const auto& text : given) {
      const auto colon = text.rfind(':');
      const std::string name = colon == std::string::npos ? "" : text.substr(0, colon);
      const std::string number = colon == std::string::npos ? text : text.substr(colon + 1);
      double value = 0;
      try {
        size_t used = 0;
        value = std::stod(number, &used);
        if (used != number.size() || value < 0) throw std::invalid_argument("");
      } catch (const std::exception&) {
        throw UsageError(fmt::format("{} '{}': expected a non-negative number or OUTPUT:NUMBER (e.g. {} out1:1e-3)",
                                     flag, text, flag));
      }
      if (name.empty()) global = value;
      else perOutput[name] = value;
    }
  };
  apply(o.rtol, "--rtol", t.rtol, t.rtolFor);
  apply(o.atol, "--atol", t.atol, t.atolFor);
  apply(o.scaleTol, "--scale-tol", t.scaleTol, t.scaleTolFor);
  return t;
}

void warnUnknownOutputs(const verify::ToleranceSet& tolerances, const verify::VerifyReport& report) {
  if (report.iterations.empty()) return;
  const auto names = report.iterations.front().comparison.leafNames();
  if (const auto unknown = tolerances.unknownNames(names); !unknown.empty())
    std::cerr << fmt::format("ptopt: warning: per-output tolerance for unknown output(s) {} (outputs are {})\n",
                             fmt::join(unknown, ", "), fmt::join(names, ", "));
}

}  // namespace ptopt::tools
