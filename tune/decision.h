// One decision of --tune, as the tuning session records it (tune/tunable.h)
// and its result lists it (tune/tune_model.h).
#pragma once

#include "tune/tuner.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace ptopt::tune {

// How a result's summary lists a kind's decisions other than whole-model
// ones: every one, the rewritten ones (the default), or none (a kind with
// one decision per op of a large model).
enum class Listing { Every, Rewritten, None };

struct DecisionRecord {
  std::string kind;       // "bn-to-affine", "channels-last", "precision", "conv-kernel", "onednn-blocked", "conv-prepack", "fuse-cudnn"
  std::string node;       // the op's result name (a channels-last region's: its first conv's), or "model"
  std::string signature;  // the cache key within the context
  std::string choice;     // the chosen candidate
  std::vector<std::string> candidates;
  // The challenger: the chosen candidate when one won, else the best
  // alternative; its median ratio to the baseline and 95% interval.
  std::string challenger;
  double ratio = 1, low = 1, high = 1;
  int rounds = 0;
  double seconds = 0;
  enum class Source { Measured, Cached, Skipped } source = Source::Measured;
  std::string note;  // skipped: why; measured: the tuner's summary
  // Candidates that cannot run on this machine (they threw when built or
  // timed: a kernel this CPU lacks), each with its first error line. They
  // are out of the decision, never an error of the run.
  std::vector<std::pair<std::string, std::string>> out;
  // A whole-model decision's checks at the other thread counts
  // (TuneOptions::alsoAtThreads; Choice::atThreads).
  std::vector<ThreadCheck> atThreads;
  bool rewrites() const { return !candidates.empty() && choice != candidates.front(); }
  nlohmann::json toJson() const;
  std::string line() const;  // one line for progress and --explain-like output
  std::string lineAtOneCount() const;  // the same without the thread checks
};

}  // namespace ptopt::tune
