// The one timing loop of ptopt: subjects sampled interleaved, within a
// budget, with an early stop.
//
// Contract. sampleInterleaved(clock, subjects, plan, settled) first runs
// `plan.warmupRounds` untimed rounds of every subject (first calls pay for
// allocation, oneDNN primitive creation, cuDNN's algorithm search, the
// profiling executor's specialization), continued until `warmupSeconds` have
// passed. With `minSampleMs` > 0 the last warm-up round also sets the calls
// per sample: enough that a sample of the slowest subject lasts that long (a
// microsecond kernel is not timed one call at a time). Then timed rounds: one
// sample of every subject per round, in subject order or, with `rotate`,
// starting with subject k mod n in round k, so that drift of the machine
// (another process, the clock) hits every subject alike. After each round:
//   - `settled` is asked (from round `checkFrom` on, every `checkEvery`
//     rounds): true stops the loop (the answer is clear);
//   - the loop stops when `budgetSeconds` are spent on the clock (counted
//     from the start, warm-up included, unless `budgetCountsWarmup` is off)
//     and at least `minRounds` rounds were taken, or after `maxRounds`;
//     with `hardBudget`, also before a round that would end past the budget
//     (its length forecast by the last round), minRounds or not, and the
//     warm-up keeps to a third of the budget after its first round.
// A subject that throws passes the exception through, unless
// `keepGoingOnFailure`: then it is out (its samples dropped, the first line
// of its message kept), and when subject 0 (the baseline) fails sampling ends.
// Nothing here reads a clock but `clock`, so a fake clock drives it in tests.
#pragma once

#include "measure/clock.h"

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace ptopt::measure {

struct SamplingPlan {
  int warmupRounds = 1;
  double warmupSeconds = 0;
  double minSampleMs = 0;
  int maxCallsPerSample = 1000;
  int minRounds = 1;
  int maxRounds = 100;
  double budgetSeconds = std::numeric_limits<double>::infinity();
  bool budgetCountsWarmup = true;
  // The budget holds (the never-slower stage): warm-up rounds after the
  // first only while the next would end within a third of the budget, and
  // no timed round that would end past the budget (forecast by the last
  // round, warm-up or timed), `minRounds` or not (the caller then has fewer
  // rounds than it wanted, maybe none).
  bool hardBudget = false;
  bool rotate = false;
  bool keepGoingOnFailure = false;
  int checkFrom = 1, checkEvery = 1;
};

struct Sampling {
  std::vector<std::vector<double>> ms;  // per subject, one sample (ms per call) per round
  std::vector<std::string> errors;      // per subject: "" unless it failed
  int rounds = 0;                       // timed rounds taken
  int callsPerSample = 1;
  double seconds = 0;        // on the clock, warm-up included
  bool settled = false;      // stopped because `settled` said so
  bool baselineFailed = false;
  bool failed(size_t i) const { return !errors[i].empty(); }
};

Sampling sampleInterleaved(Clock& clock, const std::vector<Subject>& subjects, const SamplingPlan& plan,
                           const std::function<bool(const Sampling&)>& settled = {});

}  // namespace ptopt::measure
