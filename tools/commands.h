// The ptopt subcommands: options, registration with CLI11, and entry points.
#pragma once

#include "driver/driver.h"
#include "driver/op_table.h"
#include "driver/report.h"
#include "driver/util.h"
#include "tools/verify_setup.h"

#include <CLI/CLI.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptopt::tools {

// The driver's helpers the subcommands share: the run's record and the
// --report file (driver/report.h), op tables (driver/op_table.h), timing and
// sizes (driver/util.h).
using driver::countOps;
using driver::formatBytes;
using driver::formatOpTable;
using driver::parameterBytes;
using driver::RunRecord;
using driver::sameFile;
using driver::Stopwatch;
using driver::toJson;
using driver::versionsJson;
using driver::writeReport;

// A bad command line: exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// OUT (or a report) could not be written: disk full, permissions. Exit 1;
// nothing partial is left behind. The driver's, which the run throws.
using driver::WriteError;

// --tune and its options (tools/cmd_tuning.cpp; the work is tune/tune_model.h).
struct TuneCliOptions {
  bool tune = false;
  double budgetSeconds = -1;  // -1: tune::kDefaultBudgetSeconds
  std::string cachePath;      // "": tune::TuningCache::defaultPath()
  bool reproducibleClock = false;  // --reproducible-clock (or PTOPT_REPRODUCIBLE_CLOCK=1)
  std::string threads;             // --tune-threads 1,all (request option tune_threads)
};
void registerTuneOptions(CLI::App& app, TuneCliOptions& o);

struct OptimizeOptions {
  std::string input, output;
  std::string passes;
  bool passesGiven = false;
  std::string preset;  // "-O0".."-O3"
  std::string quantize;     // --quantize int8: appends quantize{dtype=int8} to the pipeline
  std::string calibration;  // --calibration FILE: batches for quantize (the --inputs formats, a list of batches)
  std::string pipelineFile;
  std::vector<std::string> preserveMethods;
  std::vector<std::string> rulesFiles;
  VerifyCliOptions verify;
  bool noVerify = false;
  bool verifyFlag = false;
  bool overwrite = false;
  std::string to;  // --to torchscript|pt2
  bool inPlace = false;
  bool progress = false;
  std::string reportPath;
  bool force = false;
  bool quiet = false;
  bool verbose = false;
  bool printPipeline = false;
  bool printAfterAll = false;
  bool printChanged = false;
  bool timePasses = false;
  bool verifyEach = false;
  bool explain = false;
  bool preferBf16 = false;
  bool keepTraining = false;  // --keep-training: refuse a model in training mode instead of optimizing it in eval semantics
  std::optional<std::string> target;  // --target: the device the optimized model is for (driver::Request's default: auto)
  long bisectLimit = -1;
  std::string dotDir;  // --dot-dir: drawings before, after each changing pass, after (tools/dot_dir.h)
  std::string assumeIsa;        // --assume-isa: decide as on a CPU of this level (target/capabilities.h)
  bool noMeasure = false;       // --no-measure: do not time OUT against IN
  // Options the user may leave out take driver::Request's defaults, stated
  // there once (driver/request_options.h maps the flags onto it by name).
  std::optional<double> measureBudget;  // --measure-budget SECONDS per comparison (driver/measure.h)
  std::optional<int> measureThreads;    // --measure-threads N
  TuneCliOptions tune;  // --tune, --tune-budget, --tuning-cache (tools/cmd_tuning.cpp)
};
void registerOptimizeOptions(CLI::App& app, OptimizeOptions& o);
int runOptimize(const OptimizeOptions& o, int argc, char** argv);

struct ShowOptions {
  std::string input;
  std::vector<std::string> preserveMethods;
  bool opsOnly = false;
};
void registerShowOptions(CLI::App& cmd, ShowOptions& o);
int runShow(const ShowOptions& o);

// `ptopt verify A.pt B.pt`: compares two models (B against reference A).
struct VerifyOptions {
  std::string reference, candidate;
  VerifyCliOptions verify;
  std::string reportPath;
  bool verbose = false;
};
void registerVerifyOptions(CLI::App& cmd, VerifyOptions& o);
int runVerify(const VerifyOptions& o);

// `ptopt bench IN.pt [--vs OTHER.pt]`: latency statistics.
struct BenchOptions {
  std::string model, vs;
  VerifyCliOptions inputs;  // --input-shape / --inputs / --device / --seed
  std::optional<int> threads;
  std::vector<int64_t> batches;
  double warmupSeconds = 1.0;
  double minSeconds = 2.0;
  int minIters = 10;
  std::optional<int> iters;
  std::string jsonPath;
};
void registerBenchOptions(CLI::App& cmd, BenchOptions& o);
int runBench(const BenchOptions& o);

// `ptopt tuning show|clear [--tuning-cache FILE]`.
struct TuningOptions {
  std::string action;  // show | clear
  std::string cachePath;
};
void registerTuningOptions(CLI::App& cmd, TuningOptions& o);
int runTuning(const TuningOptions& o);

struct PassesOptions {
  std::string name;
};
void registerPassesOptions(CLI::App& cmd, PassesOptions& o);
int runPasses(const PassesOptions& o);

}  // namespace ptopt::tools
