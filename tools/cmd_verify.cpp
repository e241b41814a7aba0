// `ptopt verify A.pt B.pt`: runs two models on the same inputs and device and
// compares their outputs, B against the reference A. Exit 0 when they match
// within tolerance, 3 when not, 2 for bad input.
#include "ir/model_format.h"
#include "tools/commands.h"
#include "api/api.h"
#include "driver/measure.h"
#include "driver/report.h"
#include "driver/util.h"
#include "session/session.h"

#include "ir/model.h"
#include "ir/pt2.h"
#include "verify/inputs.h"
#include "verify/runner.h"

#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <optional>

namespace ptopt::tools {

void registerVerifyOptions(CLI::App& cmd, VerifyOptions& o) {
  cmd.add_option("reference", o.reference, "The reference model (A)")->required();
  cmd.add_option("candidate", o.candidate, "The model to check against it (B)")->required();
  registerVerifyCliOptions(cmd, o.verify);
  cmd.add_option("--report", o.reportPath, "Write the comparison as JSON here");
  cmd.add_flag("-v,--verbose", o.verbose, "Print the metrics of every output");
  cmd.footer(
      "Examples:\n"
      "  ptopt verify model.pt model.opt.pt --input-shape 1,3,224,224\n"
      "  ptopt verify model.pt model.bf16.pt --inputs batch.pt --rtol 5e-2 --atol 1e-2\n"
      "Exit codes: 0 outputs match, 3 they differ, 2 bad input.");
}

int runVerify(const VerifyOptions& o) {
  // Nothing here is timed: every physical core, as `ptopt IN OUT` verifies.
  std::optional<ScopedThreads> threads;
  if (const int n = driver::untimedWorkThreads(); n > 0) threads.emplace(n);
  // A .pt2 reference records the shapes it was exported at: verified there,
  // and a dynamic one at other sizes too, as `ptopt IN OUT` verifies it,
  // unless inputs are given.
  verify::InputRequest inputs = inputRequest(o.verify);
  torch::jit::Module a;
  if (inputs.shapes.empty() && inputs.file.empty() && ir::formatOfFile(o.reference) == ir::ModelFormat::Pt2) {
    const ir::Pt2ReadResult program = ir::readPt2File(o.reference);
    a = ir::runnableProgram(program.model);
    if (auto specs = verify::recordedInputSpecs(program.model.forward())) {
      std::vector<std::vector<int64_t>> given;
      for (const verify::InputSpec& spec : *specs) {
        inputs.shapes.push_back(spec.str());
        given.push_back(spec.shape);
      }
      // A dynamic program: at other sizes within its ranges too.
      inputs.otherSizes = program.program.shapes.otherInputSizes(given);
    }
  } else {
    a = ir::loadRunnable(o.reference);
  }
  torch::jit::Module b = ir::loadRunnable(o.candidate);
  FaceWords words;
  words.referenceName = o.reference;
  words.candidateName = o.candidate;
  words.inputsHint = "";
  words.cudaHint = "--device cuda";
  words.shapesName = "--input-shape";
  words.note = [](const std::string& note) { std::cout << "note: " << note << "\n"; };
  // B's own precision sets the criterion (a bf16 B is judged as bf16), the flags' terms over it.
  const verify::ToleranceSet tolerances = candidateTolerances(b, toleranceOverrides(o.verify), words);
  verify::VerifyReport report;
  try {  // the library's session: the same comparison as ptopt.verify in Python
    report = compareModules(a, b, inputs, tolerances, o.verify.device, words);
  } catch (const std::invalid_argument& e) {  // no inputs, a bad input spec or device
    throw UsageError(e.what());
  }
  warnUnknownOutputs(tolerances, report);
  std::cout << "verification: " << report.verdict() << "\n";
  if (!report.passed) std::cout << report.failureReport();
  else if (o.verbose && !report.iterations.empty()) std::cout << report.iterations.front().comparison.summary();
  if (!o.reportPath.empty()) {
    nlohmann::json j = {{"reference", o.reference}, {"candidate", o.candidate}, {"versions", versionsJson()},
                        {"verification", report.toJson()}};
    std::ofstream out(o.reportPath);
    if (!out) throw UsageError("cannot write report '" + o.reportPath + "'");
    out << j.dump(2) << "\n";
  }
  std::cout << (report.passed ? "PASSED" : "FAILED") << ": " << o.candidate << " against " << o.reference << "\n";
  return report.passed ? 0 : 3;
}

}  // namespace ptopt::tools
