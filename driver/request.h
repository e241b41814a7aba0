// The one request for a run of ptopt: what `ptopt IN OUT ...` and
// `ptopt.optimize(...)` ask for, whichever face asked. The front ends turn
// flags or keyword arguments into a Request and hand it to driver::optimize
// (driver/driver.h); nothing about the run is decided in a front end.
//
// One policy for both faces (the defaults are each face's own, and said
// where they differ):
//   verification  Required: the result is checked or the run fails (no inputs
//                 to check with, or assumed input shapes that do not fit the
//                 model, are errors); WhenPossible: as Required, except that
//                 when the inputs cannot be planned or the assumed shapes do
//                 not fit, the run goes on unverified with a warning; Off: not
//                 checked (given inputs are still run once, to catch shapes
//                 that do not fit). The CLI's default is WhenPossible
//                 (--verify and --verify-each: Required, --no-verify: Off);
//                 Python's is Required (verify=False: Off).
//   inputs        given inputs that do not fit the model are an error
//                 (InputsDoNotFit) under every policy.
//   force         the result is kept even when verification fails (the CLI
//                 writes it and exits 3; Python returns it with a warning) or
//                 when it is measurably slower than the input.
//   calibration   a file (calibrationFile) or values in memory, checked the
//                 same way; with two batches or more and no fixed inputs, the
//                 last batch is held out to verify on.
#pragma once

#include "ir/model.h"
#include "verify/compare.h"
#include "ir/model_format.h"
#include "verify/input_plan.h"

#include <ATen/core/ivalue.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::driver {

enum class Verification { Required, WhenPossible, Off };

// The caller's terms of the verification bound (verify/compare.h), applied
// over the defaults of the pipeline's precision.
struct ToleranceOverrides {
  std::optional<double> rtol, atol, scaleTol;
  std::map<std::string, double> rtolFor, atolFor, scaleTolFor;  // per output leaf
  bool empty() const {
    return !rtol && !atol && !scaleTol && rtolFor.empty() && atolFor.empty() && scaleTolFor.empty();
  }
  // `base` with these terms applied (each sets its own term of the bound).
  verify::ToleranceSet over(const verify::Tolerance& base) const {
    verify::ToleranceSet set{base, rtolFor, atolFor, scaleTolFor};
    if (rtol) set.base.rtol = *rtol;
    if (atol) set.base.atol = *atol;
    if (scaleTol) set.base.scaleTol = *scaleTol;
    return set;
  }
};

struct Request {
  // ---- the model
  std::string input;             // IN, a TorchScript or .pt2 file; "" when the front end hands over a loaded module
  std::string output;            // OUT, written once verified (atomically); "": the bytes stay in memory
  std::optional<ir::ModelFormat> to;  // OUT's format (--to); nullopt: by OUT's extension, else IN's format
  bool overwrite = false;        // OUT may exist
  bool inPlace = false;          // OUT may be IN itself (replaced only after everything succeeded)
  ir::ImportOptions importOptions;  // methods to keep besides forward

  // ---- the pipeline
  std::string pipeline = "-O1";  // pipeline text, or a preset alone or followed by more passes
  std::string pipelineSource;    // where `pipeline` came from, for messages (a file name); "": the text itself
  std::vector<std::string> ruleFiles;  // --rules FILE
  std::vector<std::string> ruleTexts;  // rule-file syntax in memory (Python rules=...)
  std::string quantize;          // "int8", "bf16", "fp16", "auto": quant::addRequestedPrecision

  // ---- inputs and verification
  verify::InputRequest inputs;   // shapes, a file, or values in memory; none: inferred when safe
  Verification verification = Verification::WhenPossible;
  ToleranceOverrides tolerances;
  std::string device = "auto";   // where verification and timing run: auto, cpu, cuda

  // ---- calibration (quantize)
  std::string calibrationFile;           // a file of batches in the --inputs formats
  std::vector<c10::IValue> calibration;  // or the batches in memory
  std::string calibrationName = "calibration=";  // how messages name the in-memory batches

  // ---- target and mode
  std::string target = "auto";   // the device the result is for (auto: `device`)
  bool preferBf16 = false;
  std::string assumeIsa;         // decide as on a CPU of this level (target/capabilities.h)
  bool keepTraining = false;     // refuse a model in training mode instead of optimizing it in eval semantics

  // ---- tune
  bool tune = false;
  double tuneBudgetSeconds = 0;  // <= 0: tune::kDefaultBudgetSeconds per --tune-threads count
  std::string tuningCache;       // "": tune::TuningCache::defaultPath()
  // The intra-op thread counts OUT is tuned for (--tune-threads 1,all): one
  // tuning with each count first (its decisions timed there, whole-model
  // ones confirmed at the others), the first's file kept unless another's
  // is faster at one count and slower at none (tune/thread_orders.h).
  // Empty: LibTorch's count.
  std::vector<int> tuneThreads;
  // Decide on measure::ReproducibleClock (times that are a hash of each
  // candidate's name: the output depends on the request alone), nothing
  // cached: the CLI's --reproducible-clock, for before/after comparisons.
  bool reproducibleClock = false;

  // ---- measure (the never-slower stage, driver/measure.h)
  bool measure = true;
  bool force = false;
  double measureBudgetSeconds = 2.0;
  // <= 0: the first --tune-threads count when tuning for named counts (a
  // file tuned for 2 threads is judged at 2), else 1.
  int measureThreads = 0;
  // Intra-op threads for the untimed work (the reference's runs, the
  // passes, the load back, verification); <= 0 leaves LibTorch's count.
  // --tune, the measure stage and their caches run at LibTorch's own count
  // (what a deployment of OUT gets). The CLI sets the physical cores
  // available (driver/util.h) unless OMP_NUM_THREADS or MKL_NUM_THREADS is
  // set; Python leaves the count to torch.set_num_threads.
  int workThreads = 0;

  // ---- what the run reports as it goes (the front end shows it)
  bool explain = false;          // the passes' declines, and the target's capabilities
  bool describeTarget = false;   // the target's capabilities alone (-v)
  bool printAfterAll = false;
  bool printChanged = false;
  bool verifyEach = false;       // check after every changing pass and name the first that breaks tolerance
  long bisectLimit = -1;
  std::string dotDir;            // drawings before, after each changing pass, after

  bool verifying() const { return verification != Verification::Off; }
};

}  // namespace ptopt::driver
