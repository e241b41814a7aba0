// tuneForThreadCounts with a fake timer whose prices depend on LibTorch's
// thread count: the pipeline is tuned once with each count first, and the
// other order's model replaces the first's only when it is faster at one
// count and not slower at the others; the same model is not timed twice, a
// second run times nothing, and one count is tunePipeline alone. The
// candidates run for real (the fake timer calls them).
#include "tests/support/pass_test.h"
#include "tests/tune/fake_timer.h"
#include "tests/tune/tune_results.h"
#include "tune/thread_orders.h"

#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <optional>
#include <string>

using namespace ptopt;

namespace {

// At 1 thread each conv's oneDNN kernel wins and so does their whole-model
// assignment; at 2 threads the kernel loses and the assignment ties. So the
// order 1,2 keeps oneDNN's convs and the order 2,1 the preset's. The
// orders' models are priced by `atOne` and `atTwo` (the 2,1 model's time at
// each count; the 1,2 model takes 1 ms at both).
test::FakeTimer orderTimer(double atOne, double atTwo) {
  test::FakeTimer timer({}, 0.01);
  timer.setRule([atOne, atTwo](const std::string& name) -> std::optional<double> {
    const bool two = at::get_num_threads() == 2;
    if (name == "mkldnn") return two ? 2.0 : 0.5;
    if (name.rfind("op-by-op", 0) == 0) return two ? 1.0 : 0.5;
    if (name == "tuned-2,1") return two ? atTwo : atOne;
    return std::nullopt;
  });
  return timer;
}

tune::TuneResult tuneOrders(const test::Fixture& f, test::FakeTimer& timer, const std::string& cache,
                            const std::vector<int>& counts, double budget = 1000) {
  Optimizer opt = Optimizer::load(f.path);
  return tune::tuneForThreadCounts(opt.model(), parsePipelineOrPreset("-O1"), defaultRegistry(),
                                   test::exampleContext(f), test::timedOn(timer, cache, budget), counts);
}

const tune::DecisionRecord* orderDecision(const tune::TuneResult& r) {
  return test::wholeModelDecision(r, "thread-order");
}

}  // namespace

TEST_CASE("tuneForThreadCounts: the other order's model replaces the first's when faster at one count, slower at none") {
  const auto& f = test::fixture("resnet18_script");
  const int threads = at::get_num_threads();
  const std::string cache = test::freshTuningCache("ptopt_thread_orders_test_", "orders.json");

  SECTION("faster at 2 threads, as fast at 1: the 2,1 file is kept") {
    test::FakeTimer timer = orderTimer(1.0, 0.5);
    const tune::TuneResult r = tuneOrders(f, timer, cache, {1, 2});
    REQUIRE(r.orders.size() == 2);
    CHECK(r.orders[0].threads == std::vector<int>{1, 2});
    CHECK(r.orders[1].threads == std::vector<int>{2, 1});
    CHECK_THAT(r.orders[0].pipeline, Catch::Contains("tuned-kernels{mkldnn="));  // the orders did differ
    CHECK_THAT(r.orders[1].pipeline, !Catch::Contains("mkldnn"));
    CHECK_FALSE(r.orders[0].chosen);
    CHECK(r.orders[1].chosen);
    CHECK(r.orders[0].toJson().contains("tuning"));  // the order not chosen keeps its decisions in the report
    const tune::DecisionRecord* d = orderDecision(r);
    REQUIRE(d);
    CHECK(d->choice == "tuned-2,1");
    CHECK(d->ratio < 0.6);  // at the count it won at
    REQUIRE(d->atThreads.size() == 2);  // one per count: at 1 (no win, then confirmed not slower), at 2 (the win)
    CHECK(d->atThreads[0].threads == 1);
    CHECK_FALSE(d->atThreads[0].slower);
    CHECK(d->atThreads[1].threads == 2);
    CHECK(d->atThreads[1].ratio < 0.6);
    CHECK_THAT(rewriters::printPipeline(r.pipeline), !Catch::Contains("mkldnn"));
    CHECK_THAT(r.summary(), Catch::Contains("tuned in 2 thread orders"));
    CHECK_THAT(r.summary(), Catch::Contains("thread-order (whole model): tuned-2,1"));
    CHECK(at::get_num_threads() == threads);

    // The second run times nothing and keeps the same file.
    test::FakeTimer again = orderTimer(1.0, 0.5);
    const tune::TuneResult warm = tuneOrders(f, again, cache, {1, 2});
    CHECK(again.samples() == 0);
    const tune::DecisionRecord* cached = orderDecision(warm);
    REQUIRE(cached);
    CHECK(cached->source == tune::DecisionRecord::Source::Cached);
    CHECK(cached->choice == "tuned-2,1");
    CHECK(rewriters::printPipeline(warm.pipeline) == rewriters::printPipeline(r.pipeline));
  }
  SECTION("faster at 2 threads but slower at 1: the first order's file stays") {
    test::FakeTimer timer = orderTimer(1.5, 0.5);
    const tune::TuneResult r = tuneOrders(f, timer, "", {1, 2});
    const tune::DecisionRecord* d = orderDecision(r);
    REQUIRE(d);
    CHECK(d->choice == "tuned-1,2");
    REQUIRE_FALSE(d->atThreads.empty());
    CHECK(d->atThreads[0].threads == 1);
    CHECK(d->atThreads[0].slower);
    CHECK(r.orders[0].chosen);
    CHECK_THAT(rewriters::printPipeline(r.pipeline), Catch::Contains("tuned-kernels{mkldnn="));
  }
  SECTION("within noise at both counts: the first order's file stays") {
    test::FakeTimer timer = orderTimer(1.0, 1.0);
    const tune::TuneResult r = tuneOrders(f, timer, "", {1, 2});
    const tune::DecisionRecord* d = orderDecision(r);
    REQUIRE(d);
    CHECK(d->choice == "tuned-1,2");
    CHECK(d->atThreads.size() == 2);
    CHECK(r.orders[0].chosen);
  }
  at::set_num_threads(threads);
}

TEST_CASE("tuneForThreadCounts: orders that tune to the same model are not timed against each other") {
  const auto& f = test::fixture("resnet18_script");
  // The kernel wins at both counts: both orders keep oneDNN's convs.
  test::FakeTimer timer({{"mkldnn", 0.5}, {"op-by-op", 0.5}}, 0.01);
  const tune::TuneResult r = tuneOrders(f, timer, "", {2, 1});
  REQUIRE(r.orders.size() == 2);
  CHECK(r.orders[0].pipeline == r.orders[1].pipeline);
  CHECK_FALSE(orderDecision(r));
  CHECK(r.orders[0].chosen);
  CHECK_THAT(r.orders[1].note, Catch::Contains("the same model as 2,1: not timed"));
  CHECK_THAT(r.summary(), Catch::Contains("the same model as 2,1"));
}

TEST_CASE("tuneForThreadCounts: one count is tunePipeline at that count; the budget bounds every order") {
  const auto& f = test::fixture("resnet18_script");
  const int threads = at::get_num_threads();
  SECTION("one count") {
    test::FakeTimer timer = orderTimer(1.0, 1.0);
    const tune::TuneResult r = tuneOrders(f, timer, "", {2});
    CHECK(r.orders.empty());
    CHECK_FALSE(orderDecision(r));
    CHECK_THAT(r.context, Catch::Contains("| 2 threads"));
    CHECK_THAT(rewriters::printPipeline(r.pipeline), !Catch::Contains("mkldnn"));  // decided at 2
    CHECK(at::get_num_threads() == threads);
  }
  SECTION("a budget shared by the orders") {
    test::FakeTimer timer = orderTimer(1.0, 0.5);
    const tune::TuneResult r = tuneOrders(f, timer, "", {1, 2}, 2.0);
    REQUIRE(r.orders.size() == 2);
    CHECK(r.orders[0].budgetSeconds == Approx(0.9));  // 90% of the budget over two orders
    CHECK(r.orders[1].budgetSeconds <= 1.8 - r.orders[0].seconds + 0.01);  // what the first left of the 90%
    CHECK(r.budgetSeconds == Approx(2.0));
    CHECK(r.seconds < 2.5);
  }
}
