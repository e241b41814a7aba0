#include "tune/tuner.h"

#include "tune/stats.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace ptopt::tune {

const char* verdictName(CandidateResult::Verdict v) {
  switch (v) {
    case CandidateResult::Verdict::Baseline: return "baseline";
    case CandidateResult::Verdict::Won: return "won";
    case CandidateResult::Verdict::Lost: return "lost";
    case CandidateResult::Verdict::WithinNoise: return "within noise";
    case CandidateResult::Verdict::Failed: return "failed";
  }
  return "?";
}

std::string Choice::summary() const {
  if (baselineFailed) return "the baseline failed: " + (results.empty() ? std::string() : results[0].error);
  std::string s;
  for (size_t i = 1; i < results.size(); ++i) {
    const CandidateResult& c = results[i];
    if (!s.empty()) s += "; ";
    if (c.verdict == CandidateResult::Verdict::Failed) s += c.name + " failed";
    else s += fmt::format("{} {:.2f}x [{:.2f}, {:.2f}] {}", c.name, c.ratio, c.low, c.high, verdictName(c.verdict));
  }
  return fmt::format("{}: {} ({} over {}, {} rounds{})", name, s.empty() ? "no alternative" : s,
                     results.empty() ? "" : fmt::format("{:.3f} ms", results[0].medianMs),
                     results.empty() ? "" : results[0].name, rounds, outOfTime ? ", out of time" : "");
}

namespace {

using Verdict = CandidateResult::Verdict;

// One sample of candidate `c`, or the error it threw.
bool sample(Timer& timer, const Candidate& c, int calls, double& ms, std::string& error) {
  try {
    ms = timer.timeMs(c, calls);
    return true;
  } catch (const std::exception& e) {
    error = e.what();
    const size_t nl = error.find('\n');  // c10 errors carry a backtrace after the first line
    if (nl != std::string::npos) error.resize(nl);
    return false;
  }
}

}  // namespace

Choice Tuner::choose(const std::vector<Candidate>& candidates, const TuneLimits& limits) const {
  if (candidates.empty()) throw std::invalid_argument("Tuner::choose: no candidates");
  const double start = timer_.elapsedSeconds();
  auto spent = [&] { return timer_.elapsedSeconds() - start; };
  Choice choice;
  const size_t n = candidates.size();
  choice.results.resize(n);
  std::vector<std::vector<double>> samples(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) choice.results[i].name = candidates[i].name;
  choice.results[0].verdict = Verdict::Baseline;

  // Warm-up: one call each (first calls pay for allocation, oneDNN primitive
  // creation, cuDNN's algorithm search), then the calls per sample from the
  // slowest warm call of the second pass.
  double slowest = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < n; ++i) {
      if (!alive[i]) continue;
      double ms = 0;
      if (!sample(timer_, candidates[i], 1, ms, choice.results[i].error)) {
        alive[i] = false;
        choice.results[i].verdict = Verdict::Failed;
        continue;
      }
      if (pass == 1) slowest = std::max(slowest, ms);
    }
  }
  choice.name = candidates[0].name;
  if (!alive[0]) {
    choice.baselineFailed = true;
    choice.seconds = spent();
    return choice;
  }
  if (slowest > 0 && slowest < limits.minSampleMs)
    choice.callsPerSample = std::min(limits.maxCallsPerSample, static_cast<int>(std::ceil(limits.minSampleMs / slowest)));

  auto decideAll = [&] {
    bool undecided = false;
    for (size_t i = 1; i < n; ++i) {
      if (!alive[i]) continue;
      CandidateResult& r = choice.results[i];
      const RatioEstimate e = bootstrapMedianRatio(samples[0], samples[i], 1000, 7 + i);
      r.ratio = e.median;
      r.low = e.low;
      r.high = e.high;
      const double bar = 1.0 - limits.margin;
      if (e.high < bar) r.verdict = Verdict::Won;
      else if (e.low > bar) r.verdict = Verdict::Lost;
      else r.verdict = Verdict::WithinNoise, undecided = true;
    }
    return !undecided;
  };

  bool settled = false;
  for (int round = 0; round < limits.maxRounds; ++round) {
    // Rotated order: round k starts with candidate k mod n.
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + static_cast<size_t>(round)) % n;
      if (!alive[i]) continue;
      double ms = 0;
      if (!sample(timer_, candidates[i], choice.callsPerSample, ms, choice.results[i].error)) {
        alive[i] = false;
        choice.results[i].verdict = Verdict::Failed;
        continue;
      }
      samples[i].push_back(ms);
    }
    if (!alive[0]) {  // the baseline failed after warming up: keep it, decide nothing
      choice.baselineFailed = true;
      break;
    }
    // A candidate that failed mid-round has fewer samples: drop it from the pairing.
    for (size_t i = 1; i < n; ++i)
      if (!alive[i]) samples[i].clear();
    choice.rounds = round + 1;
    if (choice.rounds >= limits.minRounds) {
      settled = decideAll();
      if (settled) break;
    }
    if (spent() >= limits.maxSeconds) {
      break;
    }
  }
  if (choice.rounds > 0 && choice.rounds < limits.minRounds && !choice.baselineFailed) decideAll();
  choice.outOfTime = !settled && choice.rounds < limits.maxRounds && !choice.baselineFailed;
  for (size_t i = 0; i < n; ++i)
    if (!samples[i].empty()) choice.results[i].medianMs = percentile(samples[i], 0.5);
  // Too few rounds for an interval: nothing wins.
  if (choice.rounds < 2)
    for (size_t i = 1; i < n; ++i)
      if (choice.results[i].verdict == Verdict::Won) choice.results[i].verdict = Verdict::WithinNoise;
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (choice.results[i].verdict == Verdict::Won && (best == 0 || choice.results[i].ratio < choice.results[best].ratio))
      best = i;
  choice.index = best;
  choice.name = candidates[best].name;
  choice.seconds = spent();
  return choice;
}

}  // namespace ptopt::tune
