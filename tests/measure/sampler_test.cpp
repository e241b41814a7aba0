// The measuring library's sampler, verdict rule and clock (measure/),
// driven by a fake clock: nothing here depends on this machine's speed.
#include "measure/clock.h"
#include "measure/sampler.h"
#include "measure/verdict.h"

#include "tests/measure/fake_clock.h"

#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include <stdexcept>
#include <string>
#include <vector>

using namespace ptopt;
using measure::SamplingPlan;
using measure::Verdict;
using test::FakeClock;

namespace {

// Subjects that log the order they run in.
measure::Subject logged(FakeClock& c, std::vector<std::string>& log, const std::string& name, double ms) {
  return {name, [&c, &log, name, ms] {
            c.now += ms;
            log.push_back(name);
          }};
}

}  // namespace

TEST_CASE("sampler: warm-up, then one sample of each subject per round, in order or rotated") {
  FakeClock c;
  std::vector<std::string> log;
  std::vector<measure::Subject> s{logged(c, log, "a", 1), logged(c, log, "b", 2), logged(c, log, "c", 3)};
  SamplingPlan plan;
  plan.warmupRounds = 1;
  plan.maxRounds = 3;
  plan.rotate = true;
  const measure::Sampling out = measure::sampleInterleaved(c, s, plan);
  CHECK(out.rounds == 3);
  CHECK(log == std::vector<std::string>{"a", "b", "c", /* timed */ "a", "b", "c", "b", "c", "a", "c", "a", "b"});
  CHECK(out.ms[1] == std::vector<double>{2, 2, 2});
  CHECK(out.seconds == Approx(0.024));

  log.clear();
  plan.rotate = false;
  plan.warmupRounds = 0;
  plan.maxRounds = 2;
  measure::sampleInterleaved(c, s, plan);
  CHECK(log == std::vector<std::string>{"a", "b", "c", "a", "b", "c"});
}

TEST_CASE("sampler: the budget counts the warm-up, minRounds hold past it, settled stops early") {
  FakeClock c;
  SamplingPlan plan;
  plan.warmupRounds = 2;
  plan.maxRounds = 1000;
  plan.budgetSeconds = 0.1;  // 100 ms: 2 warm-up rounds of 10 ms, then 8 timed rounds
  const auto a = c.run(4), b = c.run(6);
  CHECK(measure::sampleInterleaved(c, {a, b}, plan).rounds == 8);
  plan.budgetCountsWarmup = false;
  CHECK(measure::sampleInterleaved(c, {a, b}, plan).rounds == 10);
  plan.minRounds = 30;
  CHECK(measure::sampleInterleaved(c, {a, b}, plan).rounds == 30);
  // settled is asked from round 5 on, every 3 rounds, and stops the loop.
  plan.minRounds = 1;
  plan.budgetSeconds = 1e9;
  plan.checkFrom = 5;
  plan.checkEvery = 3;
  std::vector<int> asked;
  const measure::Sampling s = measure::sampleInterleaved(c, {a, b}, plan, [&](const measure::Sampling& now) {
    asked.push_back(now.rounds);
    return now.rounds >= 11;
  });
  CHECK(asked == std::vector<int>{5, 8, 11});
  CHECK(s.rounds == 11);
  CHECK(s.settled);
}

TEST_CASE("sampler: a time-based warm-up, and calls per sample from the slowest warm call") {
  FakeClock c;
  int calls = 0;
  SamplingPlan plan;
  plan.warmupRounds = 1;
  plan.warmupSeconds = 0.05;  // 50 ms of 2 ms calls: 25 warm-up calls
  plan.maxRounds = 1;
  measure::sampleInterleaved(c, {c.run(2, 0, &calls)}, plan);
  CHECK(calls == 26);

  FakeClock exact;  // binary fractions: the sums are exact
  calls = 0;
  SamplingPlan tiny;
  tiny.warmupRounds = 2;
  tiny.minSampleMs = 1.0;
  tiny.maxRounds = 2;
  const measure::Sampling s =
      measure::sampleInterleaved(exact, {exact.run(0.0625), exact.run(0.25, 0, &calls)}, tiny);
  CHECK(s.callsPerSample == 4);  // 1 ms / 0.25 ms, the slower subject
  CHECK(calls == 2 + 2 * 4);
  CHECK(s.ms[1][0] == Approx(0.25));  // per call
}

TEST_CASE("sampler: a failing subject is out with its message, a failing baseline ends it, or the throw passes") {
  FakeClock c;
  int runs = 0;
  measure::Subject flaky{"flaky", [&runs, &c] {
                           c.now += 1;
                           if (++runs == 4) throw std::runtime_error("no kernel\nbacktrace");
                         }};
  SamplingPlan plan;
  plan.maxRounds = 5;
  plan.keepGoingOnFailure = true;
  const measure::Sampling s = measure::sampleInterleaved(c, {c.run(1), flaky, c.run(2)}, plan);
  CHECK(s.failed(1));
  CHECK(s.errors[1] == "no kernel");
  CHECK(s.ms[1].empty());
  CHECK(s.ms[2].size() == 5);
  CHECK_FALSE(s.baselineFailed);

  runs = 0;
  const measure::Sampling b = measure::sampleInterleaved(c, {flaky, c.run(1)}, plan);
  CHECK(b.baselineFailed);
  CHECK(b.rounds == 2);  // rounds 1 and 2 (after one warm-up); the 4th run threw

  runs = 0;
  plan.keepGoingOnFailure = false;
  CHECK_THROWS_WITH(measure::sampleInterleaved(c, {c.run(1), flaky}, plan), Catch::Contains("no kernel"));
  CHECK_THROWS_AS(measure::sampleInterleaved(c, {}, plan), std::invalid_argument);
}

TEST_CASE("verdict: one rule for faster, slower and settled") {
  const double m = 0.02;
  CHECK(measure::judge({0.80, 0.75, 0.85, 100}, m) == Verdict::Faster);
  CHECK(measure::judge({1.10, 1.05, 1.15, 100}, m) == Verdict::Slower);
  CHECK(measure::judge({0.99, 0.97, 1.01, 100}, m) == Verdict::NoClearDifference);
  CHECK(measure::judge({0.97, 0.975, 0.979, 100}, 0.0) == Verdict::Faster);  // bench: no margin
  // Can it still become faster (the tuner's "lost" is: no longer)?
  CHECK(measure::couldStillBe(Verdict::Faster, {0.99, 0.96, 1.02, 100}, m));
  CHECK_FALSE(measure::couldStillBe(Verdict::Faster, {1.00, 0.99, 1.02, 100}, m));
  CHECK(measure::couldStillBe(Verdict::Slower, {1.00, 0.99, 1.03, 100}, m));
  CHECK_FALSE(measure::couldStillBe(Verdict::Slower, {1.00, 0.99, 1.01, 100}, m));
  // Settled: decided, or wholly within 1 +- margin (the never-slower early stop).
  CHECK(measure::verdictSettled({1.5, 1.4, 1.6, 100}, m));
  CHECK(measure::verdictSettled({1.0, 0.99, 1.01, 100}, m));
  CHECK_FALSE(measure::verdictSettled({1.0, 0.95, 1.05, 100}, m));
  // The never-slower question alone: answered once the interval's high end is
  // below 1 + margin, though it could still turn out faster.
  CHECK(measure::slowerSettled({0.97, 0.96, 0.99, 100}, m));
  CHECK_FALSE(measure::verdictSettled({0.97, 0.96, 0.99, 100}, m));
  CHECK(measure::slowerSettled({1.10, 1.05, 1.15, 100}, m));
  CHECK_FALSE(measure::slowerSettled({1.00, 0.95, 1.05, 100}, m));
  CHECK(measure::verdictName(Verdict::NoClearDifference) == "no clear difference");
}

TEST_CASE("clock: thread CPU time at one CPU thread, the steady clock otherwise, per call") {
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  measure::DeviceClock cpu(c10::kCPU);
  CHECK(cpu.method() == "thread CPU time");
  CHECK(measure::DeviceClock(c10::kCPU, {false, false}).method() == "steady_clock");
  volatile double sink = 0;
  const measure::Subject spin{"spin", [&sink] {
                                for (int i = 0; i < 200000; ++i) sink = sink + i * 1e-9;
                              }};
  const double one = cpu.timeMs(spin, 1), ten = cpu.timeMs(spin, 10);
  CHECK(one > 0);
  CHECK(ten > 0);  // per call, not the sum of ten
  CHECK(ten < one * 5);
  CHECK(cpu.elapsedSeconds() >= 0);
  at::set_num_threads(before);
}
