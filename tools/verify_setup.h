// Command-line verification options shared by `ptopt IN OUT` and
// `ptopt verify A B`, and how they become an InputSource and tolerances.
#pragma once

#include "driver/request.h"
#include "ir/ir.h"
#include "verify/compare.h"
#include "verify/input_plan.h"
#include "verify/runner.h"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace ptopt::tools {

struct VerifyCliOptions {
  std::vector<std::string> inputShapes;
  std::string inputsFile;
  std::string intRange;
  std::optional<uint64_t> seed;   // verify::InputRequest's default when not given
  std::optional<int> iterations;
  std::string executor = "plain";  // --verify-executor
  std::string device = "auto";
  std::vector<std::string> rtol, atol, scaleTol;  // "X" or "OUTPUT:X"
};
// `comparing`: the options that only matter when outputs are compared
// (--rtol, --atol, --scale-tol, --seed, --verify-iters, --verify-executor); `ptopt bench` has no use for them.
void registerVerifyCliOptions(CLI::App& app, VerifyCliOptions& o, bool comparing = true);

// What verification will run on, and what was assumed to get there
// (verify/input_plan.h).
using InputPlan = verify::InputPlan;
// The flags as a verify::InputRequest.
verify::InputRequest inputRequest(const VerifyCliOptions& o);
// verify::planInputs on the flags; its InputPlanError (a spec that does not
// parse, a count that does not match the model's inputs, an unreadable
// file) becomes a UsageError (exit 2).
InputPlan planInputs(const VerifyCliOptions& o, const ir::Graph& forward);

// --rtol/--atol/--scale-tol ("X" or "OUTPUT:X") as the request's terms of
// the bound; each sets its own term (verify/compare.h). UsageError for a
// value that is not a non-negative number.
driver::ToleranceOverrides toleranceOverrides(const VerifyCliOptions& o);

// Warns on stderr about --rtol/--atol/--scale-tol names that match no output.
void warnUnknownOutputs(const verify::ToleranceSet& tolerances, const verify::VerifyReport& report);

}  // namespace ptopt::tools
