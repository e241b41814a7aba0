// Input planning: which inputs verification runs on. From a file saved in
// Python (`--inputs`), from one spec per input (`--input-shape`), or, when
// neither is given, assumed from the model's first op where that is safe
// (inferInputSpecs). Inputs with defaults may be left out: they take their
// defaults. Inputs that no spec can describe (lists, tuples, dicts, strings)
// come only from a file; planning says how to save one.
#pragma once

#include "ir/ir.h"
#include "verify/inputs.h"
#include "verify/runner.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptopt::verify {

// What the user asked for (the command-line flags, one field each).
struct InputRequest {
  std::vector<std::string> shapes;  // --input-shape, one per input (parseInputSpec)
  std::string file;                 // --inputs FILE
  std::string intRange;             // --int-range LO,HI
  uint64_t seed = 0;                // --seed
  int iterations = 3;               // --verify-iters
  std::string executor = "plain";   // --verify-executor
  // Values already in memory (the C++ and Python APIs' example inputs), in
  // order or by name: planned like a --inputs file (instead of one). Named
  // `valuesName` in messages.
  std::optional<InputSet> values;
  std::string valuesName = "example_inputs";
  // Runs 1, 2, ... at these sizes (one list per input) instead: a dynamic
  // program's other sizes (InputSource::otherSizes).
  std::vector<std::vector<std::vector<int64_t>>> otherSizes;
};

// The plan: the source, and what was assumed to get there.
struct InputPlan {
  std::optional<InputSource> source;  // nullopt: cannot verify (`message` says why and what to do)
  bool inferred = false;              // shapes were assumed, not given
  std::string message;                // the assumption, or why verification is skipped
};

// A request that cannot work (exit 2 in the CLI): a spec that does not parse,
// both a file and shapes, a count that does not match the model's inputs
// (naming the missing ones), an unreadable file, shapes for inputs that only
// a file can give.
class InputPlanError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws InputPlanError. With no shapes and no file, a model whose inputs
// cannot be assumed gets a plan without a source (not an error).
InputPlan planInputs(const InputRequest& request, const ir::Graph& forward);

}  // namespace ptopt::verify
