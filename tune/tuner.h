// The tuner: which of a few equivalent candidates runs fastest here.
//
// Contract. `Tuner::choose` gets candidates that compute the same thing
// (candidate 0 is the baseline: what the graph does without the rewrite) and
// a Timer (a measure::Clock). It times them with the measuring library's
// sampler (measure/sampler.h): two warm-up calls of each (the second also
// calibrating how many calls make one sample, so that a sample of a
// microsecond op is at least `minSampleMs` long), then rounds, each round one
// sample of every candidate in a rotated order, so that a drift of the machine
// (another process, the clock) hits all of them alike. After `minRounds`
// rounds and after every round from then on, each alternative gets the median
// of its samples over the baseline's, with a 95% bootstrap interval over the
// paired rounds, judged by the one verdict rule (measure/verdict.h): an
// alternative *wins* when it is Faster (the whole interval below 1 - margin),
// *loses* when it can no longer be Faster (the interval's low end above
// 1 - margin); when several win, the fastest of them must also be Faster
// than each other winner, or within the margin of it (paired the same way).
// The rounds stop when every alternative has won or lost so, after
// `maxRounds`, or when the decision's time slice (`maxSeconds`, on the Timer's
// clock) is spent; then the fastest (lowest median) winner is chosen, else the
// baseline: within noise the graph stays as it is. A candidate that throws is
// out (its message is kept); when the baseline throws nothing is chosen. The
// decision never depends on wall-clock time except through the Timer, so tests
// drive it with a deterministic fake (tests/tune/fake_timer.h).
#pragma once

#include "measure/clock.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace ptopt::tune {

// A candidate is a measured subject ("conv2d", "mkldnn", "bf16",
// "channels-last=on" and one call); the Timer is the measuring library's
// clock: the real one is measure::DeviceClock (under InferenceMode), tests
// script a fake one.
using Candidate = measure::Subject;
using Timer = measure::Clock;

struct TuneLimits {
  int minRounds = 5;
  int maxRounds = 30;
  double margin = 0.02;        // a win must be faster than 1 - margin, beyond noise
  double maxSeconds = 5.0;     // this decision's time slice
  double minSampleMs = 1.0;    // calls per sample are raised until a sample is at least this long
  int maxCallsPerSample = 1000;
};

struct CandidateResult {
  std::string name;
  double medianMs = 0;
  // median(this) / median(baseline) and its 95% interval; 1 for the baseline.
  double ratio = 1, low = 1, high = 1;
  enum class Verdict { Baseline, Won, Lost, WithinNoise, Failed } verdict = Verdict::WithinNoise;
  std::string error;  // Failed: what it threw
};
const char* verdictName(CandidateResult::Verdict v);

// A whole-model choice checked again at another intra-op thread count
// (TuneOptions::alsoAtThreads): the challenger against the baseline there,
// by the never-slower question (measure/verdict.h slowerSettled).
struct ThreadCheck {
  int threads = 0;
  std::string challenger;
  double ratio = 1, low = 1, high = 1;  // challenger / baseline at `threads`
  int rounds = 0;
  bool slower = false;  // Slower beyond noise: the challenger is not kept
  std::string error;    // it could not be timed there (then not kept either)
  // "at 2 threads: fused 1.31x [1.22, 1.40], slower".
  std::string line() const;
  nlohmann::json toJson() const;
  static ThreadCheck fromJson(const nlohmann::json& j);
};

struct Choice {
  size_t index = 0;  // into the candidates; 0 (the baseline) unless one won
  std::string name;
  std::vector<CandidateResult> results;  // one per candidate, in order
  int rounds = 0;
  int callsPerSample = 1;
  double seconds = 0;     // on the Timer's clock
  bool outOfTime = false;  // the slice ran out before every alternative was decided
  bool baselineFailed = false;
  // The winners' checks at the other thread counts, in the order made (a
  // winner slower at one of them gave way to the next, or to the baseline).
  std::vector<ThreadCheck> atThreads;
  // One line: "mkldnn 0.82x [0.79, 0.85] over conv2d, 12 rounds".
  std::string summary() const;
  // The chosen candidate's ratio to the baseline (1 when the baseline stays).
  double chosenRatio() const { return results.empty() ? 1.0 : results[index].ratio; }
};

class Tuner {
 public:
  explicit Tuner(Timer& timer) : timer_(timer) {}
  Choice choose(const std::vector<Candidate>& candidates, const TuneLimits& limits) const;
  // Whether `challenger` is slower than `baseline`, the never-slower
  // question: the pair interleaved (warm-up and calls per sample as
  // choose) until it is judged Slower, or can no longer be, within the
  // limits. `threads` is recorded, not set: the caller runs it there.
  ThreadCheck confirm(const Candidate& baseline, const Candidate& challenger, int threads,
                      const TuneLimits& limits) const;

 private:
  Timer& timer_;
};

}  // namespace ptopt::tune
