#include "tune/tuner.h"

#include "measure/sampler.h"
#include "measure/stats.h"
#include "measure/verdict.h"

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

namespace {
// How a decision samples its candidates: two warm-up rounds (the second sets
// the calls per sample), rotated rounds within the limits, a candidate that
// throws out, the question asked from minRounds on.
measure::SamplingPlan samplingPlan(const TuneLimits& limits) {
  measure::SamplingPlan plan;
  plan.warmupRounds = 2;
  plan.minSampleMs = limits.minSampleMs;
  plan.maxCallsPerSample = limits.maxCallsPerSample;
  plan.maxRounds = limits.maxRounds;
  plan.budgetSeconds = limits.maxSeconds;
  plan.rotate = true;
  plan.keepGoingOnFailure = true;
  plan.checkFrom = limits.minRounds;
  return plan;
}
}  // namespace

std::string ThreadCheck::line() const {
  if (!error.empty()) return fmt::format("at {} thread{}: {} failed ({})", threads, threads == 1 ? "" : "s", challenger, error);
  return fmt::format("at {} thread{}: {} {:.2f}x [{:.2f}, {:.2f}]{}", threads, threads == 1 ? "" : "s", challenger, ratio,
                     low, high, slower ? ", slower: not kept" : ", not slower");
}

nlohmann::json ThreadCheck::toJson() const {
  nlohmann::json j = {{"threads", threads}, {"challenger", challenger}, {"ratio", ratio}, {"low", low},
                      {"high", high},       {"rounds", rounds},         {"slower", slower}};
  if (!error.empty()) j["error"] = error;
  return j;
}

ThreadCheck ThreadCheck::fromJson(const nlohmann::json& j) {
  ThreadCheck c;
  c.threads = j.value("threads", 0);
  c.challenger = j.value("challenger", std::string());
  c.ratio = j.value("ratio", 1.0), c.low = j.value("low", 1.0), c.high = j.value("high", 1.0);
  c.rounds = j.value("rounds", 0);
  c.slower = j.value("slower", false);
  c.error = j.value("error", std::string());
  return c;
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
  std::string checks;
  for (const ThreadCheck& c : atThreads) checks += "; " + c.line();
  return fmt::format("{}: {} ({} over {}, {} rounds{}){}", name, s.empty() ? "no alternative" : s,
                     results.empty() ? "" : fmt::format("{:.3f} ms", results[0].medianMs),
                     results.empty() ? "" : results[0].name, rounds, outOfTime ? ", out of time" : "", checks);
}

Choice Tuner::choose(const std::vector<Candidate>& candidates, const TuneLimits& limits) const {
  using Verdict = CandidateResult::Verdict;
  if (candidates.empty()) throw std::invalid_argument("Tuner::choose: no candidates");
  const size_t n = candidates.size();
  Choice choice;
  choice.name = candidates[0].name;
  choice.results.resize(n);
  for (size_t i = 0; i < n; ++i) choice.results[i].name = candidates[i].name;
  choice.results[0].verdict = Verdict::Baseline;

  // Each alternative against the baseline by the one verdict rule: won when
  // Faster, lost when it can no longer be; true when every one is decided.
  auto decideAll = [&](const measure::Sampling& s) {
    bool undecided = false;
    for (size_t i = 1; i < n; ++i) {
      if (s.failed(i)) continue;
      CandidateResult& r = choice.results[i];
      const measure::RatioEstimate e = measure::bootstrapMedianRatio(s.ms[0], s.ms[i], 1000, 7 + i);
      r.ratio = e.median;
      r.low = e.low;
      r.high = e.high;
      if (measure::judge(e, limits.margin) == measure::Verdict::Faster) r.verdict = Verdict::Won;
      else if (!measure::couldStillBe(measure::Verdict::Faster, e, limits.margin)) r.verdict = Verdict::Lost;
      else r.verdict = Verdict::WithinNoise, undecided = true;
    }
    if (undecided) return false;
    // Two winners or more: the fastest is chosen, so it must be told from
    // the others (faster beyond noise, or within the margin of one: then
    // either will do), not picked by a median a few rounds moved.
    size_t best = 0;
    for (size_t i = 1; i < n; ++i)
      if (!s.failed(i) && choice.results[i].verdict == Verdict::Won &&
          (best == 0 || choice.results[i].ratio < choice.results[best].ratio))
        best = i;
    for (size_t j = 1; best != 0 && j < n; ++j) {
      if (j == best || s.failed(j) || choice.results[j].verdict != Verdict::Won) continue;
      const measure::RatioEstimate e = measure::bootstrapMedianRatio(s.ms[j], s.ms[best], 1000, 7 + j);
      const bool faster = measure::judge(e, limits.margin) == measure::Verdict::Faster;
      const bool even = e.low >= 1 - limits.margin && e.high <= 1 + limits.margin;
      if (!faster && !even) return false;
    }
    return true;
  };

  const measure::SamplingPlan plan = samplingPlan(limits);
  const measure::Sampling s = measure::sampleInterleaved(timer_, candidates, plan, decideAll);

  for (size_t i = 0; i < n; ++i)
    if (s.failed(i)) {
      choice.results[i].verdict = Verdict::Failed;
      choice.results[i].error = s.errors[i];
    }
  choice.rounds = s.rounds;
  choice.callsPerSample = s.callsPerSample;
  choice.seconds = s.seconds;
  choice.baselineFailed = s.baselineFailed;
  if (s.baselineFailed) return choice;
  if (s.rounds > 0 && s.rounds < limits.minRounds) decideAll(s);  // the slice ran out first
  choice.outOfTime = !s.settled && s.rounds < limits.maxRounds;
  for (size_t i = 0; i < n; ++i)
    if (!s.ms[i].empty()) choice.results[i].medianMs = measure::percentile(s.ms[i], 0.5);
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
  return choice;
}

ThreadCheck Tuner::confirm(const Candidate& baseline, const Candidate& challenger, int threads,
                           const TuneLimits& limits) const {
  ThreadCheck check;
  check.threads = threads;
  check.challenger = challenger.name;
  measure::RatioEstimate last;
  auto settled = [&](const measure::Sampling& s) {
    if (s.failed(1)) return true;
    last = measure::bootstrapMedianRatio(s.ms[0], s.ms[1], 1000, 11);
    return measure::slowerSettled(last, limits.margin);
  };
  const measure::SamplingPlan plan = samplingPlan(limits);
  const measure::Sampling s = measure::sampleInterleaved(timer_, {baseline, challenger}, plan, settled);
  check.rounds = s.rounds;
  if (s.baselineFailed || s.failed(1)) {
    check.error = s.baselineFailed ? "the baseline failed: " + s.errors[0] : s.errors[1];
    check.slower = true;
    return check;
  }
  if (s.rounds < 2) {  // no interval: nothing shows it slower, nor that it is not
    check.error = "too few rounds to tell";
    check.slower = true;
    return check;
  }
  last = measure::bootstrapMedianRatio(s.ms[0], s.ms[1], 1000, 11);
  check.ratio = last.median, check.low = last.low, check.high = last.high;
  check.slower = measure::judge(last, limits.margin) == measure::Verdict::Slower;
  return check;
}

}  // namespace ptopt::tune
