// The tuner's decision logic against a fake, deterministic timer: a win
// beyond noise is kept, a difference within noise is not, a loser is not,
// a failing candidate is out, the time slice is respected, and tiny ops get
// several calls per sample.
#include "tests/tune/fake_timer.h"
#include "tune/tuner.h"

#include <catch2/catch.hpp>

#include <stdexcept>

using namespace ptopt;
using Verdict = tune::CandidateResult::Verdict;

namespace {

std::vector<tune::Candidate> candidates(std::initializer_list<const char*> names) {
  std::vector<tune::Candidate> out;
  for (const char* n : names) out.push_back({n, [] {}});
  return out;
}

}  // namespace

TEST_CASE("the tuner keeps a candidate that wins beyond noise") {
  test::FakeTimer timer({{"conv2d", 10.0}, {"mkldnn", 8.0}}, 0.02);
  const tune::Choice c = tune::Tuner(timer).choose(candidates({"conv2d", "mkldnn"}), {});
  CHECK(c.index == 1);
  CHECK(c.name == "mkldnn");
  CHECK(c.results[1].verdict == Verdict::Won);
  CHECK(c.results[1].ratio == Approx(0.8).epsilon(0.03));
  CHECK(c.results[1].high < 0.98);
  CHECK(c.results[1].low <= c.results[1].ratio);
  CHECK(c.rounds == tune::TuneLimits{}.minRounds);  // settled as soon as allowed
  CHECK_FALSE(c.outOfTime);
}

TEST_CASE("the tuner keeps the baseline when the difference is within noise") {
  test::FakeTimer timer({{"conv2d", 10.0}, {"mkldnn", 9.9}}, 0.10);
  const tune::Choice c = tune::Tuner(timer).choose(candidates({"conv2d", "mkldnn"}), {});
  CHECK(c.index == 0);
  CHECK(c.name == "conv2d");
  CHECK(c.results[1].verdict != Verdict::Won);
  CHECK(c.results[1].low < 1.0);  // the interval straddles the bar: noise, not a win
  CHECK(c.rounds > 0);
}

TEST_CASE("the tuner keeps the baseline against a slower candidate and picks the fastest winner") {
  test::FakeTimer timer({{"off", 10.0}, {"slow", 12.0}, {"fast", 7.0}, {"faster", 5.0}}, 0.01);
  const tune::Choice c = tune::Tuner(timer).choose(candidates({"off", "slow", "fast", "faster"}), {});
  CHECK(c.results[1].verdict == Verdict::Lost);
  CHECK(c.results[2].verdict == Verdict::Won);
  CHECK(c.results[3].verdict == Verdict::Won);
  CHECK(c.name == "faster");

  test::FakeTimer loser({{"off", 10.0}, {"slow", 12.0}}, 0.01);
  CHECK(tune::Tuner(loser).choose(candidates({"off", "slow"}), {}).index == 0);
}

TEST_CASE("of several winners, the tuner times on until the fastest is told from the others") {
  // Both win at minRounds; 2.5% apart under 3% noise, which a few rounds'
  // medians can order either way.
  test::FakeTimer close({{"off", 10.0}, {"a", 8.0}, {"b", 7.8}}, 0.03);
  const tune::Choice c = tune::Tuner(close).choose(candidates({"off", "a", "b"}), {});
  CHECK(c.results[1].verdict == Verdict::Won);
  CHECK(c.results[2].verdict == Verdict::Won);
  CHECK(c.name == "b");
  CHECK(c.rounds > tune::TuneLimits{}.minRounds);
  // Two winners within the margin of each other: either will do, no more
  // rounds are spent on them.
  test::FakeTimer even({{"off", 10.0}, {"a", 8.0}, {"b", 8.0}}, 0.001);
  const tune::Choice e = tune::Tuner(even).choose(candidates({"off", "a", "b"}), {});
  CHECK(e.index != 0);
  CHECK(e.rounds == tune::TuneLimits{}.minRounds);
}

TEST_CASE("a margin keeps tiny wins out") {
  test::FakeTimer timer({{"a", 10.0}, {"b", 9.9}}, 0.0);  // 1% faster, no noise at all
  tune::TuneLimits limits;
  limits.margin = 0.02;
  CHECK(tune::Tuner(timer).choose(candidates({"a", "b"}), limits).index == 0);
  limits.margin = 0.0;
  test::FakeTimer again({{"a", 10.0}, {"b", 9.9}}, 0.0);
  CHECK(tune::Tuner(again).choose(candidates({"a", "b"}), limits).index == 1);
}

TEST_CASE("the tuner stays within its time slice") {
  // 100 ms per call, 10% noise and a 1% difference: never settles by itself.
  test::FakeTimer timer({{"a", 100.0}, {"b", 99.0}}, 0.10);
  tune::TuneLimits limits;
  limits.maxSeconds = 1.0;
  limits.maxRounds = 1000;
  const tune::Choice c = tune::Tuner(timer).choose(candidates({"a", "b"}), limits);
  CHECK(c.outOfTime);
  CHECK(c.index == 0);
  // Warm-up (2 x 2 calls) plus whole rounds; the slice is checked after each round.
  const double round = 0.2 * 1.1;
  CHECK(timer.elapsedSeconds() <= limits.maxSeconds + round + 1e-9);
  CHECK(c.seconds == Approx(timer.elapsedSeconds()));
}

TEST_CASE("the tuner stops at maxRounds") {
  test::FakeTimer timer({{"a", 1.0}, {"b", 0.995}}, 0.20);
  tune::TuneLimits limits;
  limits.maxRounds = 12;
  limits.maxSeconds = 1e9;
  const tune::Choice c = tune::Tuner(timer).choose(candidates({"a", "b"}), limits);
  CHECK(c.rounds == 12);
  CHECK(c.index == 0);
}

TEST_CASE("a candidate that throws is out and a failing baseline decides nothing") {
  test::FakeTimer timer({{"a", 10.0}, {"broken", 1.0}});
  std::vector<tune::Candidate> cs{{"a", [] {}}, {"broken", [] { throw std::runtime_error("no kernel\nbacktrace"); }}};
  const tune::Choice c = tune::Tuner(timer).choose(cs, {});
  CHECK(c.index == 0);
  CHECK(c.results[1].verdict == Verdict::Failed);
  CHECK(c.results[1].error == "no kernel");

  test::FakeTimer t2({{"a", 10.0}});
  std::vector<tune::Candidate> bad{{"a", [] { throw std::runtime_error("boom"); }}, {"b", [] {}}};
  const tune::Choice c2 = tune::Tuner(t2).choose(bad, {});
  CHECK(c2.baselineFailed);
  CHECK(c2.index == 0);
}

TEST_CASE("tiny ops are timed over several calls per sample") {
  test::FakeTimer timer({{"a", 0.01}, {"b", 0.005}});
  tune::TuneLimits limits;
  limits.minSampleMs = 1.0;
  const tune::Choice c = tune::Tuner(timer).choose(candidates({"a", "b"}), limits);
  CHECK(c.callsPerSample >= 99);
  CHECK(c.callsPerSample <= 101);
  CHECK(c.name == "b");
}

TEST_CASE("confirm: the never-slower question about a challenger, as the other thread counts ask it") {
  const auto c = candidates({"preset", "op-by-op", "equal"});
  test::FakeTimer timer({{"preset", 10.0}, {"op-by-op", 13.0}, {"equal", 10.0}}, 0.02);
  const tune::ThreadCheck slower = tune::Tuner(timer).confirm(c[0], c[1], 4, {});
  CHECK(slower.threads == 4);
  CHECK(slower.challenger == "op-by-op");
  CHECK(slower.slower);
  CHECK(slower.ratio == Approx(1.3).epsilon(0.03));
  CHECK(slower.low > 1.02);
  CHECK(slower.rounds == tune::TuneLimits{}.minRounds);  // settled as soon as allowed
  CHECK_THAT(slower.line(), Catch::Contains("at 4 threads: op-by-op 1.3") && Catch::Contains("slower: not kept"));

  const tune::ThreadCheck same = tune::Tuner(timer).confirm(c[0], c[2], 1, {});
  CHECK_FALSE(same.slower);
  CHECK(same.high < 1.02);  // settled: no more samples could make it slower
  CHECK_THAT(same.line(), Catch::Contains("at 1 thread: equal") && Catch::Contains("not slower"));

  // One that throws there, or too little time to tell, is not kept either.
  const tune::Candidate throws{"broken", [] { throw std::runtime_error("no kernel at this count"); }};
  const tune::ThreadCheck failed = tune::Tuner(timer).confirm(c[0], throws, 2, {});
  CHECK(failed.slower);
  CHECK_THAT(failed.error, Catch::Contains("no kernel at this count"));
  tune::TuneLimits none;
  none.maxSeconds = 0;
  const tune::ThreadCheck unseen = tune::Tuner(timer).confirm(c[0], c[2], 2, none);
  CHECK(unseen.slower);
  CHECK_THAT(unseen.error, Catch::Contains("too few rounds"));

  const tune::ThreadCheck back = tune::ThreadCheck::fromJson(slower.toJson());
  CHECK(back.line() == slower.line());
}
