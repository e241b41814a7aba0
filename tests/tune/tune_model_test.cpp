// tunePipeline end to end with a fake timer (deterministic decisions, no
// timing): winners become pass options of the tuned pipeline, losers and
// ties keep the graph as it is, the cache makes the second run time nothing
// and a different thread count re-tunes, the budget is respected. The
// candidates themselves run for real (the fake timer calls them), so a
// candidate with wrong arguments fails here.
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"
#include "tests/tune/fake_timer.h"
#include "tune/tune_model.h"

#include <ATen/Parallel.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <unistd.h>

using namespace ptopt;
namespace fs = std::filesystem;

namespace {

struct Tuned {
  tune::TuneResult result;
  size_t samples = 0;
};

Tuned tuneFixture(Optimizer& opt, const test::Fixture& f, const std::string& preset, test::FakeTimer& timer,
                  const std::string& cache, double budget = 1000) {
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  tune::TuneOptions o;
  o.timer = &timer;
  o.cachePath = cache;
  o.budgetSeconds = budget;
  Tuned t{tune::tunePipeline(opt.model(), parsePipelineOrPreset(preset), defaultRegistry(), ctx, o), 0};
  t.samples = timer.samples();
  return t;
}

// Per-op decisions of `kind` (the whole-model checks, node "model", apart).
size_t countKind(const tune::TuneResult& r, const std::string& kind, bool rewritten) {
  size_t n = 0;
  for (const auto& d : r.decisions) n += d.kind == kind && d.node != "model" && (!rewritten || d.rewrites());
  return n;
}

// The whole-model check of `kind`'s op-by-op assignment (preferOpByOp), if any.
const tune::DecisionRecord* wholeModel(const tune::TuneResult& r, const std::string& kind) {
  for (const auto& d : r.decisions)
    if (d.kind == kind && d.node == "model") return &d;
  return nullptr;
}

std::string tempCache(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("ptopt_tune_test_" + std::to_string(::getpid())) / name;
  fs::remove(p);
  return p.string();
}

}  // namespace

TEST_CASE("tunePipeline: turns a measured kernel win into tuned-kernels and the cache skips the second run") {
  const auto& f = test::fixture("resnet18_script");
  const std::string cache = tempCache("kernels.json");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer fast({{"mkldnn", 0.5}, {"op-by-op", 0.5}}, 0.01);
  const Tuned first = tuneFixture(opt, f, "-O1", fast, cache);
  CHECK(countKind(first.result, "conv-kernel", false) == 20);
  CHECK(countKind(first.result, "conv-kernel", true) == 20);
  const tune::DecisionRecord* whole = wholeModel(first.result, "conv-kernel");
  REQUIRE(whole);
  CHECK(whole->rewrites());  // the whole model confirmed the op-by-op choice
  CHECK(first.result.measured > 1);
  CHECK(first.result.measured < 21);  // repeated shapes are measured once
  CHECK(first.result.cached == 21 - first.result.measured);
  const std::string text = rewriters::printPipeline(first.result.pipeline);
  CHECK_THAT(text, Catch::Contains("tuned-kernels{mkldnn="));
  CHECK(text.find("tuned-kernels") < text.find("fuse-cudnn"));  // before the closing device lowering
  REQUIRE(fs::exists(cache));

  // The tuned pipeline, run by the pass manager with the edit-log check.
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  rewriters::PassManager pm(defaultRegistry(), first.result.pipeline, test::checkedInstrumentation());
  auto report = pm.run(opt.model(), ctx);
  CHECK(test::countOps(opt.model().forward(), "aten::mkldnn_convolution") == 20);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);

  // Second run, same cache: nothing is timed.
  Optimizer again = Optimizer::load(f.path);
  test::FakeTimer second({{"mkldnn", 0.5}, {"op-by-op", 0.5}}, 0.01);
  const Tuned warm = tuneFixture(again, f, "-O1", second, cache);
  CHECK(warm.result.measured == 0);
  CHECK(warm.result.cached == 21);
  CHECK(warm.samples == 0);
  CHECK(rewriters::printPipeline(warm.result.pipeline) == text);

  // Another thread count is another context: timed again.
  const int threads = at::get_num_threads();
  at::set_num_threads(threads + 1);
  test::FakeTimer third({{"mkldnn", 0.5}, {"op-by-op", 0.5}}, 0.01);
  const Tuned other = tuneFixture(again, f, "-O1", third, cache);
  at::set_num_threads(threads);
  CHECK(other.result.measured == first.result.measured);
  CHECK(other.samples > 0);
}

TEST_CASE("tunePipeline: keeps the graph when the rewrite loses or ties") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer slower({{"mkldnn", 1.5}}, 0.01);
  const Tuned lost = tuneFixture(opt, f, "-O1", slower, "");
  CHECK(countKind(lost.result, "conv-kernel", true) == 0);
  CHECK(rewriters::printPipeline(lost.result.pipeline) == rewriters::printPipeline(parsePipelineOrPreset("-O1")));

  test::FakeTimer tie({{"mkldnn", 0.995}}, 0.05);
  const Tuned tied = tuneFixture(opt, f, "-O1", tie, "");
  CHECK(countKind(tied.result, "conv-kernel", true) == 0);
}

TEST_CASE("tunePipeline: decides precision per op and drops cast when nothing wins") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  // op-by-op: the fp32 model (no op won) runs faster than the preset's bf16 one.
  test::FakeTimer slowBf16({{"bfloat16", 2.0}, {"mkldnn", 2.0}, {"mode=auto", 2.0}, {"mode=on", 2.0}, {"op-by-op", 0.5}},
                           0.01);
  const Tuned fp32 = tuneFixture(opt, f, "-O3", slowBf16, "");
  CHECK(countKind(fp32.result, "precision", false) > 0);
  CHECK(countKind(fp32.result, "precision", true) == 0);
  CHECK_FALSE(rewriters::pipelineUses(fp32.result.pipeline, "cast"));
  CHECK_THAT(rewriters::printPipeline(fp32.result.pipeline), Catch::Contains("channels-last{mode=off"));

  test::FakeTimer fastBf16({{"bfloat16", 0.5}, {"mkldnn", 2.0}, {"op-by-op", 0.5}}, 0.01);
  const Tuned lowp = tuneFixture(opt, f, "-O3", fastBf16, "");
  CHECK(countKind(lowp.result, "precision", true) == countKind(lowp.result, "precision", false));
  const std::string text = rewriters::printPipeline(lowp.result.pipeline);
  CHECK_THAT(text, Catch::Contains("cast{dtype=bf16"));
  CHECK_THAT(text, Catch::Contains("min-channels=0"));
}

TEST_CASE("tunePipeline: each op's precision candidates pay only the casts its neighbours need") {
  // resnet18 under -O3's assignment: the stem conv reads the float32 graph
  // input and feeds (through relu and max_pool) low-precision convs; the
  // convs inside the blocks read and feed low-precision values; the fc's
  // result is a graph output (float32).
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer({{"bfloat16", 0.5}, {"mkldnn", 2.0}, {"op-by-op", 0.5}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O3", timer, "");
  std::vector<std::string> contexts;
  for (const auto& d : t.result.decisions)
    if (d.kind == "precision" && d.node != "model") contexts.push_back(d.signature.substr(d.signature.rfind(" in ")));
  REQUIRE(contexts.size() == 21);  // 20 convs and the fc
  CHECK(contexts.front() == " in - out low");
  CHECK(std::count(contexts.begin(), contexts.end(), " in 0 out low") >= 15);
  CHECK(contexts.back() == " in 0 out fp32");
}

TEST_CASE("tunePipeline: op-by-op choices that do not add up in the whole model keep the preset's") {
  // Every op wins alone, but the model they make together is slower than the
  // preset's (as casts and layouts between ops make it on real machines).
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer({{"bfloat16", 0.5}, {"mkldnn", 0.5}, {"op-by-op", 2.0}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O3", timer, "");
  CHECK(countKind(t.result, "conv-kernel", true) == 20);
  const tune::DecisionRecord* whole = wholeModel(t.result, "conv-kernel");
  REQUIRE(whole);
  CHECK_FALSE(whole->rewrites());
  CHECK(whole->choice == "preset");
  CHECK_FALSE(rewriters::pipelineUses(t.result.pipeline, "tuned-kernels"));
  // (Every op of resnet18 lowered gives the preset's graph: no whole-model
  // check is needed for precision, and none is recorded.)
  CHECK(wholeModel(t.result, "precision") == nullptr);
  CHECK_THAT(t.result.summary(), Catch::Contains("not applied"));
}

TEST_CASE("tunePipeline: stays within its budget and the rest keep their baseline") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer slow({{"conv2d", 100.0}, {"mkldnn", 50.0}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O1", slow, "", /*budget=*/2.0);
  CHECK(t.result.budgetSpent);
  CHECK(t.result.skipped > 0);
  // Each decision stops after the round that crosses its slice: at most one
  // more round (two 100 ms samples) and its warm-up past the budget.
  CHECK(t.result.seconds <= 2.0 + 0.5);
  for (const auto& d : t.result.decisions)
    if (d.source == tune::DecisionRecord::Source::Skipped) CHECK(d.choice == "conv2d");
}

TEST_CASE("tunePipeline: needs the input shapes") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer({});
  rewriters::PassContext noInputs;
  tune::TuneOptions o;
  o.timer = &timer;
  CHECK_THROWS_WITH(tune::tunePipeline(opt.model(), parsePipelineOrPreset("-O2"), defaultRegistry(), noInputs, o),
                    Catch::Contains("--input-shape"));
}
