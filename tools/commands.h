// The ptopt subcommands: options, registration with CLI11, and entry points.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptopt::tools {

// A bad command line: exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OptimizeOptions {
  std::string input, output;
  std::string passes;
  bool passesGiven = false;
  std::string preset;  // "-O0".."-O3"
  std::string pipelineFile;
  std::vector<std::string> preserveMethods;
  std::vector<std::string> inputShapes;
  std::vector<std::string> rulesFiles;
  uint64_t seed = 0;
  int verifyIters = 3;
  bool noVerify = false;
  bool overwrite = false;
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
  long bisectLimit = -1;
  std::optional<double> rtol, atol;
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

struct PassesOptions {
  std::string name;
};
void registerPassesOptions(CLI::App& cmd, PassesOptions& o);
int runPasses(const PassesOptions& o);

}  // namespace ptopt::tools
