// --tune's options (its stage is driver/stages.h: tuneStage), and `ptopt tuning show|clear`.
#include "api/api.h"
#include "tools/commands.h"
#include "tune/tune_model.h"

#include "tune/cache.h"

#include <filesystem>
#include <fmt/format.h>
#include <iostream>

namespace ptopt::tools {

void registerTuneOptions(CLI::App& app, TuneCliOptions& o) {
  app.add_flag("--tune", o.tune,
               "Decide the pipeline's machine-dependent rewrites (bn-to-affine, channels-last per region, precision per "
               "op, the conv kernel per conv, oneDNN blocked regions on CPUs, cuDNN fusion on CUDA) by timing them here on the real input shapes; needs "
               "--input-shape or --inputs. -O2 --tune / -O3 --tune tune those presets");
  app.add_option("--tune-budget", o.budgetSeconds,
                 fmt::format("Seconds --tune may spend timing (default {:.0f} per --tune-threads count); decisions "
                             "left when it runs out keep the unrewritten op", tune::kDefaultBudgetSeconds))
      ->check(CLI::PositiveNumber);
  app.add_option("--tune-threads", o.threads,
                 "The intra-op thread counts OUT will run at, comma-separated, 'all' for the physical cores "
                 "(1,all): tuned once with each count first (decisions timed there, each whole-model choice that keeps "
                 "a rewrite timed again at the others and dropped where it is slower there); the first count's file "
                 "is kept unless another's measures faster at one count and slower at none (default: LibTorch's count "
                 "alone)");
  app.add_option("--tuning-cache", o.cachePath,
                 "JSON file of measured decisions, reused by later --tune runs (default "
                 "$XDG_CACHE_HOME/ptopt/tuning.json, else ~/.cache/ptopt/tuning.json)");
  app.add_flag("--reproducible-clock", o.reproducibleClock,
               "--tune decides on a clock that times nothing (each candidate's time is a hash of its name), so its "
               "output depends on the request alone: for comparing outputs before and after a change "
               "(scripts/output_digests.py); nothing is cached. Also PTOPT_REPRODUCIBLE_CLOCK=1");
}

void registerTuningOptions(CLI::App& cmd, TuningOptions& o) {
  cmd.add_option("action", o.action, "show: list the cached decisions; clear: remove the cache file")
      ->required()
      ->check(CLI::IsMember({"show", "clear"}));
  cmd.add_option("--tuning-cache", o.cachePath, "The cache file (default: the one --tune uses)");
}

int runTuning(const TuningOptions& o) {
  const std::string path = o.cachePath.empty() ? tune::TuningCache::defaultPath() : o.cachePath;
  if (o.action == "clear") {
    std::error_code ec;
    const bool existed = std::filesystem::remove(path, ec);
    if (ec) throw std::runtime_error("cannot remove tuning cache '" + path + "': " + ec.message());
    std::cout << (existed ? "removed " : "no tuning cache at ") << path << "\n";
    return 0;
  }
  try {
    std::cout << tune::TuningCache::open(path).str();
  } catch (const tune::CacheError& e) {
    throw ir::InputError(e.what());
  }
  return 0;
}

}  // namespace ptopt::tools
