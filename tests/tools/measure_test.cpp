// Never slower (driver/measure.h): the timing loop and the choice of what to
// write, driven by a fake timer (deterministic: each fake run advances a
// fake clock by its own duration, with a fixed pattern of jitter).
#include "driver/measure.h"
#include "driver/op_costs.h"
#include "driver/util.h"
#include "measure/verdict.h"
#include "api/api.h"
#include "ir/load_time.h"
#include "rewriters/pipeline.h"
#include "verify/inputs.h"

#include "tests/measure/fake_clock.h"

#include <ATen/Parallel.h>
#include <catch2/catch.hpp>
#include <torch/csrc/jit/ir/irparser.h>

#include <sched.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

using namespace ptopt;

namespace {

using test::FakeClock;

MeasureOptions options(double budgetSeconds = 1.0, bool earlyStop = true) {
  MeasureOptions o;
  o.budgetSeconds = budgetSeconds;
  o.earlyStop = earlyStop;
  return o;
}

}  // namespace

TEST_CASE("measurePair calls a clearly slower candidate slower, a faster one faster, an equal one neither") {
  FakeClock c;
  const auto slower = measurePair(c.run(10, 1), c.run(15, 1), options(), c);
  CHECK(slower.verdict == SpeedVerdict::Slower);
  CHECK(slower.ratio.median == Approx(1.5).epsilon(0.05));
  CHECK(slower.ratio.low <= slower.ratio.median);
  CHECK(slower.ratio.high >= slower.ratio.median);

  const auto faster = measurePair(c.run(10, 1), c.run(6, 1), options(), c);
  CHECK(faster.verdict == SpeedVerdict::Faster);
  CHECK(faster.ratio.high < 1);

  // Equal within noise (and within the 2% margin): kept.
  const auto equal = measurePair(c.run(10, 2), c.run(10, 2), options(), c);
  CHECK(equal.verdict == SpeedVerdict::NoClearDifference);
  // 1% slower is below the margin: not "measurably slower".
  const auto slightly = measurePair(c.run(10, 0.5), c.run(10.1, 0.5), options(), c);
  CHECK(slightly.verdict != SpeedVerdict::Slower);
}

TEST_CASE("judge uses the confidence interval and the margin") {
  CHECK(measure::judge({1.10, 1.05, 1.15, 100}, 0.02) == SpeedVerdict::Slower);
  CHECK(measure::judge({1.10, 1.01, 1.20, 100}, 0.02) == SpeedVerdict::NoClearDifference);  // the CI reaches 1.01
  CHECK(measure::judge({0.80, 0.75, 0.85, 100}, 0.02) == SpeedVerdict::Faster);
  CHECK(measure::judge({0.99, 0.985, 0.99, 100}, 0.02) == SpeedVerdict::NoClearDifference);
}

TEST_CASE("measurePair stays within its budget, too few pairs draw no verdict") {
  FakeClock c;
  int callsA = 0, callsB = 0;
  const auto m = measurePair(c.run(10, 0, &callsA), c.run(15, 0, &callsB), options(1.0, false), c);
  // Three warm-up pairs (75 ms), then pairs of 25 ms until 1 s has passed.
  CHECK(m.pairs == 37);
  CHECK(callsA == 40);
  CHECK(callsB == 40);
  CHECK(c.now == Approx(1000));
  CHECK(m.seconds == Approx(1.0));

  // The budget holds: a model whose pair is longer than the whole budget is
  // warmed up once and not timed; no verdict is drawn (OUT is kept).
  FakeClock slow;
  const auto s = measurePair(slow.run(800), slow.run(900), options(0.5), slow);
  CHECK(s.pairs == 0);
  CHECK(s.tooFewPairs);
  CHECK(s.verdict == SpeedVerdict::NoClearDifference);
  CHECK(slow.now == Approx(1700));
  CHECK_THAT(s.line(), Catch::Contains("does not fit in the 0.5 s budget"));
  // Two pairs would fit in the budget (after one warm-up round): fewer than
  // an interval needs, so only a difference beyond 25% in every pair could
  // give a verdict; B is 12% slower in the first pair, so none can come, and
  // the timing stops there.
  FakeClock few;
  const auto f = measurePair(few.run(800), few.run(900), options(6.0), few);
  CHECK(f.pairs == 1);
  CHECK(f.tooFewPairs);
  CHECK(f.verdict == SpeedVerdict::NoClearDifference);
  CHECK(few.now <= 6000);
  CHECK_THAT(f.line(), Catch::Contains("from 1 pair only"));
  // Stopped early: it does not claim that only one pair fitted.
  CHECK_THAT(f.line(), Catch::Contains("fewer than the 5 an interval needs fit in the 6.0 s budget"));
  // Two pairs that each differ by far more than noise do: a verdict anyway
  // (an fp16 model many times slower on a CPU).
  FakeClock far;
  const auto d = measurePair(far.run(800), far.run(2400), options(12.0), far);
  CHECK(d.pairs < 5);
  CHECK(d.tooFewPairs);
  CHECK(d.verdict == SpeedVerdict::Slower);
  CHECK_THAT(d.line(), Catch::Contains("every pair beyond 25%"));
  // Without the hard budget (a fallback's timing), minPairs are timed past it.
  FakeClock soft;
  MeasureOptions o = options(0.5);
  o.hardBudget = false;
  const auto p = measurePair(soft.run(800), soft.run(900), o, soft);
  CHECK(p.pairs == 5);
  CHECK(p.verdict == SpeedVerdict::Slower);

  // With early stopping, a clear answer ends the timing at minPairs (5).
  FakeClock clear;
  const auto e = measurePair(clear.run(10, 0.5), clear.run(15, 0.5), options(1.0), clear);
  CHECK(e.pairs == 5);
  CHECK(e.verdict == SpeedVerdict::Slower);
  FakeClock same;
  CHECK(measurePair(same.run(10, 0.5), same.run(10, 0.5), options(1.0), same).pairs == 5);
  // A little faster, by less than the noise can settle at 5 pairs: not
  // slower is the answer the stage needs, so it stops there too (it used to
  // time on to tell "faster" from "no clear difference", up to the budget).
  FakeClock little;
  int j = 0;
  auto littleFaster = little.custom([&j] {  // 9.75 ms +- 0.4, out of step with A's
    static const double pattern[] = {0.9, -0.6, 0.1, -1.0, 0.5, -0.2, 0.8};
    return 9.75 + 0.4 * pattern[j++ % 7];
  });
  const auto l = measurePair(little.run(10), littleFaster, options(1.0), little);
  INFO(l.line());
  CHECK(l.pairs == 5);
  CHECK(l.verdict != SpeedVerdict::Slower);
  CHECK(l.ratio.high < 1.02);
  CHECK(l.verdict == SpeedVerdict::NoClearDifference);  // the old rule's question (faster?) was still open
  // A noisy ratio (a wide CI around 1, half the pairs slower): timed on past
  // minPairs while the pairs that fit could still make B slower, then
  // stopped (futility), with the verdict timing to the budget would give.
  auto noisyRun = [](FakeClock& clock, bool earlyStop) {
    auto noisy = clock.custom([i = 0]() mutable {  // 10 ms +- 5, out of step with A's pattern
      static const double pattern[] = {0.9, -0.6, 0.1, -1.0, 0.5, -0.2, 0.8};
      return 10 + 5 * pattern[i++ % 7];
    });
    return measurePair(clock.run(10, 5), noisy, options(1.0, earlyStop), clock);
  };
  FakeClock unclear, unclearToTheEnd;
  const auto u = noisyRun(unclear, true);
  const auto full = noisyRun(unclearToTheEnd, false);
  INFO(u.line() << " / " << full.line());
  CHECK(u.pairs > 5);
  CHECK(u.pairs < full.pairs);
  CHECK(unclear.now < 950);
  CHECK(unclearToTheEnd.now >= 950);  // to the budget, less the pair that would have passed it
  CHECK(full.verdict != SpeedVerdict::Slower);
  CHECK(u.verdict == full.verdict);
}

TEST_CASE("measurePair stops once the pairs that still fit could not make OUT slower (futility)") {
  // resnet50's -O1 under the AVX2 cap: OUT 5% faster in the median, but one
  // pair in three is slower, so the interval at 5 pairs still reaches past
  // 1.02 and the old rule timed on to the budget (10 pairs, 1.9 s, for the
  // same "OUT kept"). About 12 pairs fit in the budget: even were every one
  // of the 7 after the fifth slower, the interval could not lie wholly above
  // 1.02, so the timing stops at 5 (not before: five pairs cost a sixth of
  // the budget, and an interval says more than four pairs).
  auto run = [](FakeClock& clock, bool earlyStop) {
    auto out = clock.custom([i = 0]() mutable {
      static const double pattern[] = {93, 104, 92, 95, 103, 94, 96};
      return pattern[i++ % 7];
    });
    return measurePair(clock.run(100, 2), out, options(3.0, earlyStop), clock);
  };
  FakeClock early, toTheEnd;
  const auto e = run(early, true);
  const auto full = run(toTheEnd, false);
  INFO(e.line() << " / " << full.line());
  CHECK(e.pairs == 5);
  CHECK_FALSE(e.futile);
  CHECK(e.ratio.high > 1.02);  // not settled by the interval alone
  CHECK(full.pairs > 10);
  CHECK_FALSE(full.futile);
  CHECK(e.verdict != SpeedVerdict::Slower);
  CHECK(full.verdict != SpeedVerdict::Slower);

  // The 1 GB linear model under the AVX2 cap: pairs of about 260 ms in a 2 s
  // budget, OUT about 8% faster in each. After two pairs the six that still
  // fit could not make it slower: stopped there (it used to time five, more
  // than half the budget).
  auto big = [](FakeClock& clock, bool earlyStop) {
    return measurePair(clock.run(140, 2), clock.run(129, 2), options(2.0, earlyStop), clock);
  };
  FakeClock bigEarly, bigToTheEnd;
  const auto b = big(bigEarly, true);
  const auto bFull = big(bigToTheEnd, false);
  INFO(b.line() << " / " << bFull.line());
  CHECK(b.pairs == 2);
  CHECK(b.futile);
  CHECK_THAT(b.line(), Catch::Contains("from 2 pairs (fewer than the 5 an interval needs: the pairs left in the 2.0 s "
                                       "budget could not make OUT slower"));
  CHECK(bFull.pairs >= 5);
  CHECK(b.verdict != SpeedVerdict::Slower);
  CHECK(bFull.verdict != SpeedVerdict::Slower);

  // Must not stop: OUT slower in every pair so far, the interval not yet
  // clear of 1.02, and enough pairs left to settle it.
  auto slower = [](FakeClock& clock) {
    auto out = clock.custom([i = 0]() mutable {
      static const double pattern[] = {104, 101, 106, 103, 100.5, 105, 104};
      return pattern[i++ % 7];
    });
    return measurePair(clock.run(100, 1), out, options(3.0), clock);
  };
  FakeClock s;
  const auto m = slower(s);
  INFO(m.line());
  CHECK(m.pairs > 5);
  CHECK_FALSE(m.futile);
  // Nor before minPairs: OUT faster in one pair of four, 10% slower in the
  // others, with pairs left that could still make it slower.
  FakeClock mixed;
  auto halfSlower = mixed.custom([i = 0]() mutable { return i++ % 4 == 1 ? 95.0 : 110.0; });
  const auto h = measurePair(mixed.run(100), halfSlower, options(2.5), mixed);
  INFO(h.line());
  CHECK(h.pairs >= 5);
  CHECK_FALSE(h.futile);
}

TEST_CASE("slowerReachable: whether added pairs, each as slow as can be, could still make B slower") {
  const std::vector<double> a(5, 100.0);
  const std::vector<double> faster = {95, 96, 94, 97, 103};  // one slower pair of five
  CHECK_FALSE(measure::slowerReachable(a, faster, 0, 0.02));
  CHECK_FALSE(measure::slowerReachable(a, faster, 5, 0.02));
  CHECK(measure::slowerReachable(a, faster, 100, 0.02));
  const std::vector<double> slower = {104, 105, 103, 106, 104};
  CHECK(measure::slowerReachable(a, slower, 0, 0.02));  // already Slower
}

TEST_CASE("pickNotSlower keeps OUT unless it is measurably slower") {
  FakeClock c;
  int built = 0;
  std::vector<Candidate> candidates = {
      {"output", "", [&] { return c.run(8, 0.5); }},
      {"fp32 structure", "", [&] { ++built; return c.run(9, 0.5); }},
      {"input", "", [&] { ++built; return c.run(10, 0.5); }},
  };
  const NeverSlowerResult r = pickNotSlower(c.run(10, 0.5), candidates, options(), c);
  CHECK(r.chosen == 0);
  REQUIRE(r.tried.size() == 1);
  CHECK(r.tried[0].measurement->verdict == SpeedVerdict::Faster);
  CHECK(built == 0);  // the fallbacks are not even built
}

TEST_CASE("pickNotSlower falls back to the first candidate that is not slower") {
  FakeClock c;
  std::vector<Candidate> candidates = {
      {"output", "", [&] { return c.run(30, 1); }},          // 3x slower (emulated precision)
      {"fp32 structure", "", [&] { return c.run(9.5, 1); }},  // faster
      {"input", "", [&] { return c.run(10, 1); }},
  };
  const NeverSlowerResult r = pickNotSlower(c.run(10, 1), candidates, options(), c);
  CHECK(r.chosen == 1);
  REQUIRE(r.tried.size() == 2);
  CHECK(r.tried[0].measurement->verdict == SpeedVerdict::Slower);
  CHECK(r.tried[1].measurement->verdict != SpeedVerdict::Slower);
}

TEST_CASE("pickNotSlower: one budget for every candidate, each fallback gets what is left") {
  // OUT (30 ms) against IN (10 ms): 3 warm-up pairs and 21 timed pairs spend the 1 s budget
  // (no early stop; the 22nd, with its jitter, would pass it); the fp32 structure then has
  // none left and gets minPairs.
  FakeClock c;
  std::vector<Candidate> candidates = {
      {"output", "", [&] { return c.run(30, 1); }},
      {"fp32 structure", "", [&] { return c.run(9.5, 1); }},
      {"input", "", [&] { return c.run(10, 1); }},
  };
  const NeverSlowerResult r = pickNotSlower(c.run(10, 1), candidates, options(1.0, false), c);
  REQUIRE(r.tried.size() == 2);
  CHECK(r.tried[0].measurement->pairs == 21);
  CHECK(r.tried[1].measurement->pairs == 5);
  CHECK(c.now < 1200);  // past the budget only by the fallback's 3 warm-up and 5 timed pairs (8 x 19.5 ms)
}

TEST_CASE("pickNotSlower writes the input itself when every built candidate is slower or unusable") {
  FakeClock c;
  int inputTimed = 0;
  std::vector<Candidate> candidates = {
      {"output", "", [&] { return c.run(30, 1); }},
      {"fp32 structure", "", []() -> measure::Subject { throw std::runtime_error("fails verification"); }},
      {"input", "", [&] { return c.run(10, 0, &inputTimed); }},
  };
  const NeverSlowerResult r = pickNotSlower(c.run(10, 1), candidates, options(), c);
  CHECK(r.chosen == 2);
  REQUIRE(r.tried.size() == 3);
  CHECK(r.tried[1].error == "fails verification");
  CHECK_FALSE(r.tried[2].measurement.has_value());
  CHECK(inputTimed == 0);  // the last one is taken untimed

  // A slower fallback is passed over as well.
  candidates[1].build = [&] { return c.run(12, 0.2); };
  const NeverSlowerResult r2 = pickNotSlower(c.run(10, 0.2), candidates, options(), c);
  CHECK(r2.chosen == 2);
  CHECK(r2.tried[1].measurement->verdict == SpeedVerdict::Slower);

  CHECK_THROWS_AS(pickNotSlower(c.run(10), {}, options(), c), std::invalid_argument);
}

// ---- The verdict in the tuning cache (driver/measure_cache.h): a warm --tune
// run with the same IN, OUT, machine and settings reuses it; anything else
// times again.

#include "driver/measure_cache.h"

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace {

// A cache file of its own under the temporary folder, removed afterwards.
struct TempCache {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("ptopt-verdict-" + std::to_string(::getpid()) + ".json")).string();
  ~TempCache() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

VerdictKey key(const std::string& in = "in-digest", const std::string& out = "out-digest", int threads = 1) {
  MeasureOptions o;
  o.threads = threads;
  return verdictKey(c10::kCPU, std::nullopt, o, in, out, {c10::IValue(at::zeros({1, 3, 8, 8}))});
}

// OUT 3x slower, the fp32 structure faster: the fallback is chosen.
CachedVerdict measuredVerdict(FakeClock& c, int* timedRuns, bool force = false) {
  std::vector<Candidate> candidates = {
      {"output", "", [&] { return c.run(30, 1, timedRuns); }},
      {"fp32 structure", "", [&] { return c.run(9.5, 1, timedRuns); }},
      {"input", "", [&] { return c.run(10, 1, timedRuns); }},
  };
  if (force) candidates.resize(1);
  CachedVerdict v;
  v.picked = pickNotSlower(c.run(10, 1, timedRuns), candidates, options(), c);
  if (force) v.picked.tried.back().measurement = measurePair(c.run(10, 1), candidates[0].build(), options(), c);
  for (const auto& cand : candidates) v.names.push_back(cand.name);
  v.writtenDigest = force ? "" : "fp32-digest";
  v.forced = force;
  return v;
}

std::vector<Candidate> namesOnly(std::initializer_list<const char*> names, int* built) {
  std::vector<Candidate> out;
  for (const char* n : names)
    out.push_back({n, "", [built]() -> measure::Subject {
                     ++*built;
                     return {"noop", [] {}};
                   }});
  return out;
}

}  // namespace

TEST_CASE("bytesDigest tells bytes apart and fileDigest reads a file in blocks") {
  std::string a(3 * (1 << 20) + 37, '\0');
  for (size_t i = 0; i < a.size(); ++i) a[i] = char((i * 131) ^ (i >> 9));
  std::string b = a;
  b[1234567] ^= 1;
  CHECK(bytesDigest(a) == bytesDigest(std::string(a)));
  CHECK(bytesDigest(a) != bytesDigest(b));
  CHECK(bytesDigest(a) != bytesDigest(a.substr(0, a.size() - 1)));
  CHECK(bytesDigest("") != bytesDigest(std::string(1, '\0')));
  CHECK(bytesDigest(a).rfind(std::to_string(a.size()) + "-", 0) == 0);
  TempCache file;  // any file name will do
  {
    std::ofstream out(file.path, std::ios::binary);
    out << a;
  }
  CHECK(fileDigest(file.path) == bytesDigest(a));
  CHECK_THROWS_AS(fileDigest(file.path + ".missing"), std::runtime_error);
}

TEST_CASE("a cached verdict is reused for the same IN, OUT, threads and inputs, and nothing is timed") {
  TempCache tc;
  FakeClock c;
  int timed = 0;
  const CachedVerdict measured = measuredVerdict(c, &timed);
  REQUIRE(measured.picked.chosen == 1);
  REQUIRE(timed > 0);
  {
    tune::TuningCache cache(tc.path);
    storeVerdict(cache, key(), measured);
    cache.save();
  }
  const tune::TuningCache reopened = tune::TuningCache::open(tc.path);
  const std::optional<CachedVerdict> hit = lookupVerdict(reopened, key());
  REQUIRE(hit);
  CHECK(hit->chosenName() == "fp32 structure");
  CHECK(hit->writtenDigest == "fp32-digest");
  REQUIRE(hit->picked.tried.size() == 2);
  const SpeedMeasurement& m = *hit->picked.tried[0].measurement;
  const SpeedMeasurement& was = *measured.picked.tried[0].measurement;
  CHECK(m.verdict == SpeedVerdict::Slower);
  CHECK(m.ratio.median == Approx(was.ratio.median));
  CHECK(m.ratio.low == Approx(was.ratio.low));
  CHECK(m.ratio.high == Approx(was.ratio.high));
  CHECK(m.pairs == was.pairs);
  CHECK(m.line() == was.line());

  // Applied to a run with the same candidates: the same choice, without
  // building or timing anything.
  int built = 0;
  const auto picked = applyCachedVerdict(*hit, namesOnly({"output", "fp32 structure", "input"}, &built), false);
  REQUIRE(picked);
  CHECK(picked->chosen == 1);
  CHECK(built == 0);
  // --force now: OUT is written, with the measurement it had.
  const auto forced = applyCachedVerdict(*hit, namesOnly({"output"}, &built), true);
  REQUIRE(forced);
  CHECK(forced->chosen == 0);
  REQUIRE(forced->tried.size() == 1);
  CHECK(forced->tried[0].measurement->verdict == SpeedVerdict::Slower);
  // A run that does not offer the candidate the cache chose times again.
  CHECK_FALSE(applyCachedVerdict(*hit, namesOnly({"output", "input"}, &built), false));
}

TEST_CASE("a different IN, OUT or thread count misses the cached verdict") {
  TempCache tc;
  FakeClock c;
  int timed = 0;
  tune::TuningCache cache(tc.path);
  storeVerdict(cache, key(), measuredVerdict(c, &timed));
  CHECK(lookupVerdict(cache, key()));
  CHECK_FALSE(lookupVerdict(cache, key("another-in")));
  CHECK_FALSE(lookupVerdict(cache, key("in-digest", "another-out")));
  CHECK_FALSE(lookupVerdict(cache, key("in-digest", "out-digest", 2)));
  MeasureOptions o;
  CHECK_FALSE(lookupVerdict(cache, verdictKey(c10::kCPU, std::nullopt, o, "in-digest", "out-digest",
                                              {c10::IValue(at::zeros({2, 3, 8, 8}))})));  // another shape
  o.budgetSeconds = 5;
  CHECK_FALSE(lookupVerdict(cache, verdictKey(c10::kCPU, std::nullopt, o, "in-digest", "out-digest",
                                              {c10::IValue(at::zeros({1, 3, 8, 8}))})));  // another budget
  CHECK(key().context().key() != key("in-digest", "out-digest", 2).context().key());
}

TEST_CASE("a verdict measured under --force does not stand in for the fallbacks it never timed") {
  FakeClock c;
  int timed = 0;
  const CachedVerdict forced = measuredVerdict(c, &timed, true);
  REQUIRE(forced.picked.tried.size() == 1);
  REQUIRE(forced.picked.tried[0].measurement->verdict == SpeedVerdict::Slower);
  tune::TuningCache cache;
  storeVerdict(cache, key(), forced);
  const auto hit = lookupVerdict(cache, key());
  REQUIRE(hit);
  int built = 0;
  CHECK_FALSE(applyCachedVerdict(*hit, namesOnly({"output", "fp32 structure", "input"}, &built), false));
  CHECK(applyCachedVerdict(*hit, namesOnly({"output"}, &built), true));
}

TEST_CASE("the fp32 structure drops the precision passes (int8 included) and the layout") {
  const auto s = fp32StructurePipeline(parsePipelineOrPreset("-O2,quantize{dtype=int8}"));
  REQUIRE(s);
  CHECK(s->dropped == std::vector<std::string>{"quantize", "channels-last"});
  CHECK_FALSE(rewriters::pipelineUses(s->pipeline, "quantize"));
  CHECK(rewriters::pipelineUses(s->pipeline, "fold-conv-bn"));
  CHECK(s->description() == "the pipeline without quantize, channels-last");
  // Nothing to drop: no fallback structure.
  CHECK_FALSE(fp32StructurePipeline(parsePipelineOrPreset("-O1")));
}

TEST_CASE("ScopedThreads repacks a ptopt file's oneDNN weights at the timing's thread count and back") {
  // A conv whose weight onednn-blocked packs when the file loads.
  torch::jit::Module m("OneConv");
  m.register_attribute("training", c10::BoolType::get(), false);
  m.register_parameter("w", at::randn({16, 8, 3, 3}), false);
  m.define(R"(
def forward(self, x):
    return torch.relu(torch.conv2d(x, self.w, None, [1, 1], [1, 1], [1, 1], 1)) + 1.0
)");
  Optimizer opt = Optimizer::fromModule(m);
  verify::InputSpec input;
  input.shape = {1, 8, 14, 14};
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs({input}, 0);
  opt.run("canonicalize,shape-prop,onednn-blocked{min-convs=1}", &ctx);
  std::istringstream bytes(opt.serialize().bytes);
  torch::jit::Module loaded = torch::jit::load(bytes);
  loaded.eval();
  REQUIRE(loaded.hasattr(ir::kLoadTimeModule));
  auto packed = [&] { return torch::jit::Module(loaded.attr(ir::kLoadTimeModule).toObject()).attr("v0").toTensor(); };
  const at::Tensor x = at::randn({1, 8, 14, 14});
  const at::Tensor expected = m.forward({x}).toTensor();
  const at::Tensor atLoad = packed();
  CHECK(atLoad.is_mkldnn());
  const int before = at::get_num_threads();
  const int other = before == 1 ? 2 : 1;
  {
    ScopedThreads threads(other, {loaded});
    CHECK(at::get_num_threads() == other);
    const at::Tensor atTiming = packed();
    CHECK(atTiming.unsafeGetTensorImpl() != atLoad.unsafeGetTensorImpl());  // made again at this count
    CHECK(at::allclose(loaded.forward({x}).toTensor(), expected, 1e-4, 1e-4));
  }
  CHECK(at::get_num_threads() == before);
  CHECK(packed().unsafeGetTensorImpl() != atLoad.unsafeGetTensorImpl());  // and again at the restored count
  CHECK(at::allclose(loaded.forward({x}).toTensor(), expected, 1e-4, 1e-4));
  // The same count: nothing to redo.
  const at::Tensor now = packed();
  { ScopedThreads same(before, {loaded}); }
  CHECK(packed().unsafeGetTensorImpl() == now.unsafeGetTensorImpl());
  // The same count, but the packs were made at another (OUT loaded back
  // during the untimed work's count): made again for the timing.
  {
    ScopedThreads same(before, {loaded}, other);
    CHECK(at::get_num_threads() == before);
    CHECK(packed().unsafeGetTensorImpl() != now.unsafeGetTensorImpl());
    CHECK(at::allclose(loaded.forward({x}).toTensor(), expected, 1e-4, 1e-4));
  }
  // A module ptopt did not write has nothing to recompute.
  CHECK_FALSE(ir::repackLoadTimeValues(m));
}

TEST_CASE("availablePhysicalCores counts the cores this process may run on") {
  const int cores = driver::availablePhysicalCores();
  CHECK(cores >= 1);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  REQUIRE(::sched_getaffinity(0, sizeof(mask), &mask) == 0);
  CHECK(cores <= CPU_COUNT(&mask));  // SMT siblings count once; never more than the CPUs allowed
  // Pinned to one CPU: one core.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mask)) {
      CPU_SET(cpu, &one);
      break;
    }
  REQUIRE(::sched_setaffinity(0, sizeof(one), &one) == 0);
  const int pinned = driver::availablePhysicalCores();
  REQUIRE(::sched_setaffinity(0, sizeof(mask), &mask) == 0);
  CHECK(pinned == 1);
}

TEST_CASE("untimedWorkThreads leaves a pool the user sized alone") {
  // Restores a variable as it was (set or not) when the case ends.
  struct SavedVariable {
    std::string name;
    std::optional<std::string> value;
    explicit SavedVariable(std::string n) : name(std::move(n)) {
      if (const char* v = std::getenv(name.c_str())) value = v;
    }
    ~SavedVariable() { value ? ::setenv(name.c_str(), value->c_str(), 1) : ::unsetenv(name.c_str()); }
  };
  SavedVariable omp("OMP_NUM_THREADS"), mkl("MKL_NUM_THREADS");
  ::unsetenv("OMP_NUM_THREADS");
  ::unsetenv("MKL_NUM_THREADS");
  CHECK(driver::untimedWorkThreads() == driver::availablePhysicalCores());
  ::setenv("OMP_NUM_THREADS", "1", 1);
  CHECK(driver::untimedWorkThreads() == 0);
  ::unsetenv("OMP_NUM_THREADS");
  ::setenv("MKL_NUM_THREADS", "3", 1);
  CHECK(driver::untimedWorkThreads() == 0);
  ::setenv("MKL_NUM_THREADS", "", 1);  // set but empty: not sized
  CHECK(driver::untimedWorkThreads() == driver::availablePhysicalCores());
}

TEST_CASE("hasQuantizedOps: an int8 graph with no float op between its int8 ops still counts as int8") {
  auto int8 = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor):
  %s : float = prim::Constant[value=0.1]()
  %z : int = prim::Constant[value=0]()
  %t : int = prim::Constant[value=13]()
  %q : Tensor = aten::quantize_per_tensor(%x, %s, %z, %t)
  %y : Tensor = quantized::add(%q, %q, %s, %z)
  %r : Tensor = aten::dequantize(%y)
  return (%r)
)IR",
                      int8.get());
  CHECK(driver::hasQuantizedOps(*int8));
  auto fp32 = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor):
  %s : Tensor = aten::sigmoid(%x)
  %r : Tensor = aten::mul(%s, %x)
  return (%r)
)IR",
                      fp32.get());
  CHECK_FALSE(driver::hasQuantizedOps(*fp32));
}
