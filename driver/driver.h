// The driver: one run of ptopt, whoever asked for it. `ptopt IN OUT ...`
// (tools/cmd_optimize.cpp) and `ptopt.optimize(...)` (session/session.h, the
// Python package) turn their flags or keyword arguments into one Request
// (driver/request.h) and call driver::optimize; what they keep is how the
// request arrives, how the run's account is shown (FrontEnd) and how the
// outcome is reported (exit codes; a result or an exception).
//
// The run, in order, so that bad input fails before anything slow happens
// and nothing is written unless everything succeeded:
//   plan       the pipeline (presets, rule files and texts, --quantize) and
//              OUT's path are checked (RequestError);
//   load       IN is loaded and imported (ir::InputError), unless the front
//              end hands over the model; a model in training mode is refused
//              with keepTraining;
//   reference  the module the result is compared with, the passes' context,
//              and the verification inputs planned by the request's policy
//              (driver/request.h); the reference runs on them once;
//   calibrate  the calibration batches checked and handed to the passes;
//   tune       measured options for the machine-dependent passes;
//   run        the pipeline, with the request's instruments (print-changed,
//              print-after-all, verify-each and its blame, dot-dir);
//   export     the result exported into OUT's temporary file (or kept in
//              memory) and loaded back from exactly those bytes;
//   verify     that module against the reference outputs;
//   measure    it is timed against IN; when it is measurably slower, the
//              first verified candidate that is not is written instead,
//              unless force (driver/stages.h);
//   save       the temporary file becomes OUT.
// The stages themselves are driver/stages.h.
#pragma once

#include "driver/report.h"
#include "driver/request.h"
#include "api/api.h"
#include "verify/blame.h"

#include <functional>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace ptopt::driver {

// A request that cannot work as asked (a bad pipeline, OUT that would
// clobber a file, contradictory options): the CLI's exit 2, Python's
// ValueError. Nothing was written.
class RequestError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// OUT could not be written (disk full, permissions): the CLI's exit 1.
// Nothing partial is left behind.
class WriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The reference fails on the inputs: they do not fit the model (shape,
// dtype). The CLI's exit 2, naming the model's inputs.
class InputsDoNotFit : public ir::InputError {
 public:
  using ir::InputError::InputError;
};

// Verification failed and the request did not force the result: nothing is
// written or returned (the library's optimizeModule throws it; the CLI exits
// 3). what() is the verdict and per-output failure report.
class VerificationFailed : public std::runtime_error {
 public:
  explicit VerificationFailed(verify::VerifyReport r);
  verify::VerifyReport report;
};

// How the run's account reaches the user. Every hook may be empty.
struct FrontEnd {
  // A line of the account ("speed: ...", "pipeline: ..."), with its newline.
  std::function<void(const std::string&)> say;
  // A note the user should see (no "note: " prefix, no newline).
  std::function<void(const std::string&)> note;
  // A note that is always shown (the CLI prints it even with -q).
  std::function<void(const std::string&)> notice;
  // A warning ("quantize: no --calibration data; ..."; "verification
  // skipped: ..."), always shown.
  std::function<void(const std::string&)> warning;
  // Where --explain, --print-changed and --print-after-all write; null: nowhere.
  std::ostream* out = nullptr;
  // --tune's progress lines; null: none.
  std::ostream* tuneProgress = nullptr;
  // Each pass execution as it starts (progress), and the end of the passes.
  std::function<void(const std::string& pass, size_t execution)> onPassStart;
  std::function<void()> onPassesEnd;
  // Drawings as the passes run (--dot-dir): the graph before, after each
  // execution (with its edit log), and after; afterPasses returns a line to say.
  std::function<void(const ir::Graph&)> beforePasses;
  std::function<void(const rewriters::PassExecution&, const ir::Graph&)> afterPass;
  std::function<std::string(const ir::Graph&)> afterPasses;
  // verify-each found the first pass that breaks tolerance (the run stops
  // there unless forced).
  std::function<void(const verify::Blame&)> blamed;
  // How this face names things in messages.
  std::string noMeasureName = "--no-measure";     // measure = false
  std::string noVerifyName = "--no-verify";       // verification = Off
  std::string inputsHint = "give --input-shape";  // how to give the inputs
  std::string verifyRequiredHint;                 // appended when Required finds nothing to verify with
};

struct Outcome {
  RunRecord record;                  // everything --report writes (stage times, counts, sections)
  bool passed = true;                // verification passed, or nothing was verified
  bool saved = false;                // OUT written (or the bytes kept): not when verification failed unforced
  std::optional<verify::Blame> blame;  // verify-each stopped the run at this pass: nothing written
  Optimizer::Serialized serialized;  // OUT in memory (when the request has no output path)
  ir::ModelFormat format = ir::ModelFormat::TorchScript;  // OUT's
  size_t nodesBefore = 0, nodesAfter = 0;
  bool inputsInferred = false;       // the verification inputs were assumed
  std::string tuneSummary;           // tune: the decisions in a few lines
  std::string written;               // what was written instead of the result, when it was slower ("": the result)
  std::string verdict() const;       // the verification verdict, or why it was skipped
};

// The run for a request whose model is the file request.input.
Outcome optimize(const Request& request, const FrontEnd& frontEnd);
// The run for a model the front end loaded (request.input, when set, names
// the file it came from: IN's bytes for the tuning cache's verdicts).
Outcome optimize(Optimizer model, const Request& request, const FrontEnd& frontEnd);

// The pipeline of a request (plan): the preset or text, rule files and rule
// texts, and --quantize, by the one rule for extra passes
// (rewriters::addExtraPasses: after the rewrites, before a closing
// fuse-cudnn). Throws rewriters::PipelineError, rewriters::RuleFileError,
// RequestError (an unreadable rule file).
rewriters::Pipeline planPipeline(const Request& request);

}  // namespace ptopt::driver
