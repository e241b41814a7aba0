#include "measure/sampler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ptopt::measure {

namespace {

// One sample of subject `i`; false (and the subject out) when it threw and
// the plan keeps going.
bool sampleOne(Clock& clock, const Subject& s, int calls, const SamplingPlan& plan, Sampling& out, size_t i,
               double& ms) {
  if (!plan.keepGoingOnFailure) {
    ms = clock.timeMs(s, calls);
    return true;
  }
  try {
    ms = clock.timeMs(s, calls);
    return true;
  } catch (const std::exception& e) {
    std::string error = e.what();
    const size_t nl = error.find('\n');  // c10 errors carry a backtrace after the first line
    if (nl != std::string::npos) error.resize(nl);
    out.errors[i] = error.empty() ? "failed" : error;
    out.ms[i].clear();
    return false;
  }
}

}  // namespace

Sampling sampleInterleaved(Clock& clock, const std::vector<Subject>& subjects, const SamplingPlan& plan,
                           const std::function<bool(const Sampling&)>& settled) {
  if (subjects.empty()) throw std::invalid_argument("sampleInterleaved: no subjects");
  const size_t n = subjects.size();
  Sampling out;
  out.ms.resize(n);
  out.errors.resize(n);
  const double start = clock.elapsedSeconds();
  auto spent = [&] { return clock.elapsedSeconds() - start; };

  double slowest = 0;
  double lastRound = 0;  // seconds of the last round (the forecast of the next)
  for (int w = 0; w < plan.warmupRounds || (plan.warmupSeconds > 0 && spent() < plan.warmupSeconds); ++w) {
    if (plan.hardBudget && w > 0 && spent() + lastRound > plan.budgetSeconds / 3) break;
    const double roundStart = spent();
    slowest = 0;  // of the last warm-up round, which sets the calls per sample
    for (size_t i = 0; i < n; ++i) {
      if (out.failed(i)) continue;
      double ms = 0;
      if (sampleOne(clock, subjects[i], 1, plan, out, i, ms)) slowest = std::max(slowest, ms);
    }
    if (out.failed(0)) {
      out.baselineFailed = true;
      out.seconds = spent();
      return out;
    }
    lastRound = spent() - roundStart;
  }
  if (plan.minSampleMs > 0 && slowest > 0 && slowest < plan.minSampleMs)
    out.callsPerSample = std::min(plan.maxCallsPerSample, static_cast<int>(std::ceil(plan.minSampleMs / slowest)));

  const double budgetStart = plan.budgetCountsWarmup ? 0 : spent();
  for (int round = 0; round < plan.maxRounds; ++round) {
    if (plan.hardBudget && spent() - budgetStart + lastRound * out.callsPerSample > plan.budgetSeconds)
      break;
    const double roundStart = spent();
    for (size_t k = 0; k < n; ++k) {
      const size_t i = plan.rotate ? (k + static_cast<size_t>(round)) % n : k;
      if (out.failed(i)) continue;
      double ms = 0;
      if (sampleOne(clock, subjects[i], out.callsPerSample, plan, out, i, ms)) out.ms[i].push_back(ms);
    }
    if (out.failed(0)) {  // the baseline failed after warming up: nothing can be compared
      out.baselineFailed = true;
      break;
    }
    out.rounds = round + 1;
    lastRound = (spent() - roundStart) / out.callsPerSample;
    if (settled && out.rounds >= plan.checkFrom && (out.rounds - plan.checkFrom) % std::max(1, plan.checkEvery) == 0 &&
        settled(out)) {
      out.settled = true;
      break;
    }
    if (out.rounds >= plan.minRounds && spent() - budgetStart >= plan.budgetSeconds) break;
  }
  out.seconds = spent();
  return out;
}

}  // namespace ptopt::measure
