// tunePipeline end to end with a fake timer (deterministic decisions, no
// timing): winners become pass options of the tuned pipeline, losers and
// ties keep the graph as it is, the cache makes the second run time nothing
// and a different thread count re-tunes, the budget is respected;
// channels-last is decided per region (one A/B for a single region). The
// candidates themselves run for real (the fake timer calls them), so a
// candidate with wrong arguments fails here.
#include "ir/op_views.h"
#include "kernels/onednn_fused_convs.h"
#include "target/kernel_probes.h"
#include "kernels/tuned_kernels.h"
#include "layout/channels_last.h"
#include "target/capabilities.h"
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"
#include "tests/tune/fake_timer.h"
#include "tests/tune/tune_results.h"
#include "tune/cache.h"
#include "tune/signature.h"
#include "tune/tunable.h"
#include "tune/tune_model.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

using namespace ptopt;
namespace fs = std::filesystem;

namespace {

struct Tuned {
  tune::TuneResult result;
  size_t samples = 0;
};

Tuned tuneFixture(Optimizer& opt, const test::Fixture& f, const std::string& preset, test::FakeTimer& timer,
                  const std::string& cache, double budget = 1000, std::vector<int> alsoAtThreads = {}) {
  tune::TuneOptions o = test::timedOn(timer, cache, budget);
  o.alsoAtThreads = std::move(alsoAtThreads);
  Tuned t{tune::tunePipeline(opt.model(), parsePipelineOrPreset(preset), defaultRegistry(), test::exampleContext(f), o),
          0};
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
  return test::wholeModelDecision(r, kind);
}

std::string tempCache(const std::string& name) { return test::freshTuningCache("ptopt_tune_test_", name); }

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
  // 20 convs, the whole-model check of their kernels, onednn-blocked's A/B,
  // and, where this LibTorch has prepacked convs, each conv's and the fc
  // linear's prepack (a tie here: none is packed, so no whole-model check
  // follows), and the whole networks' A/B where this LibTorch has fused
  // oneDNN convs or XNNPACK.
  const size_t decisions = 22 + (kernels::hasPrepackedConvs() ? 21 : 0) +
                           (kernels::hasFusedConvs() || target::xnnpackConvRuns() ? 1 : 0);
  CHECK(first.result.measured < decisions);  // repeated shapes are measured once
  CHECK(first.result.cached == decisions - first.result.measured);
  const tune::DecisionRecord* blocked = wholeModel(first.result, "onednn-blocked");
  REQUIRE(blocked);
  CHECK_FALSE(blocked->rewrites());  // the fake timer prices both the same: the graph stays dense
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
  CHECK(warm.result.cached == decisions);
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

// The fake timer's prices by LibTorch's thread count when it times: the
// op-by-op kernels (mkldnn) win at 1 thread; at 2 the whole op-by-op model
// is `atTwo` (the preset's costs 1).
test::FakeTimer threadDependentTimer(double atTwo) {
  test::FakeTimer timer({{"mkldnn", 0.5}, {"op-by-op", 0.5}}, 0.01);
  timer.setRule([atTwo](const std::string& name) -> std::optional<double> {
    if (at::get_num_threads() == 2 && name.rfind("op-by-op", 0) == 0) return atTwo;
    return std::nullopt;
  });
  return timer;
}

TEST_CASE("tunePipeline: a whole-model choice that is slower at another thread count is not kept") {
  const auto& f = test::fixture("resnet18_script");
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const std::string cache = tempCache("threads.json");
  Optimizer opt = Optimizer::load(f.path);

  SECTION("slower at 2 threads: the preset's kernels stay, and the record says why") {
    test::FakeTimer timer = threadDependentTimer(2.0);
    const Tuned t = tuneFixture(opt, f, "-O1", timer, cache, 1000, {2});
    CHECK(countKind(t.result, "conv-kernel", true) == 20);  // each conv's kernel won at 1 thread
    const tune::DecisionRecord* whole = wholeModel(t.result, "conv-kernel");
    REQUIRE(whole);
    CHECK_FALSE(whole->rewrites());
    REQUIRE(whole->atThreads.size() == 1);
    CHECK(whole->atThreads[0].threads == 2);
    CHECK(whole->atThreads[0].challenger == "op-by-op");
    CHECK(whole->atThreads[0].slower);
    CHECK(whole->atThreads[0].ratio > 1.5);
    CHECK_THAT(whole->line(), Catch::Contains("faster at this count, not at another"));
    CHECK_THAT(whole->line(), Catch::Contains("; at 2 threads: op-by-op 1.9"));
    CHECK_THAT(whole->toJson().dump(), Catch::Contains("\"at_threads\""));
    CHECK_THAT(rewriters::printPipeline(t.result.pipeline), !Catch::Contains("mkldnn"));
    CHECK_THAT(t.result.context, Catch::Contains("1 threads, confirmed at 2 threads"));
    CHECK(at::get_num_threads() == 1);  // the count is restored after each check

    // The cache keeps the confirmed choice and its check: a second run times nothing.
    test::FakeTimer again = threadDependentTimer(2.0);
    const Tuned warm = tuneFixture(opt, f, "-O1", again, cache, 1000, {2});
    CHECK(warm.samples == 0);
    const tune::DecisionRecord* cached = wholeModel(warm.result, "conv-kernel");
    REQUIRE(cached);
    CHECK_FALSE(cached->rewrites());
    REQUIRE(cached->atThreads.size() == 1);
    CHECK(cached->atThreads[0].slower);

    // Without the second count, the same prices keep the kernels (another
    // cache context: timed again).
    test::FakeTimer alone = threadDependentTimer(2.0);
    const Tuned one = tuneFixture(opt, f, "-O1", alone, cache);
    CHECK(one.samples > 0);
    const tune::DecisionRecord* oneWhole = wholeModel(one.result, "conv-kernel");
    REQUIRE(oneWhole);
    CHECK(oneWhole->rewrites());
    CHECK(oneWhole->atThreads.empty());
  }
  SECTION("as fast at 2 threads: kept, with the check recorded") {
    test::FakeTimer timer = threadDependentTimer(1.0);
    const Tuned t = tuneFixture(opt, f, "-O1", timer, "", 1000, {2});
    const tune::DecisionRecord* whole = wholeModel(t.result, "conv-kernel");
    REQUIRE(whole);
    CHECK(whole->rewrites());
    REQUIRE(whole->atThreads.size() == 1);
    CHECK_FALSE(whole->atThreads[0].slower);
    CHECK_THAT(rewriters::printPipeline(t.result.pipeline), Catch::Contains("tuned-kernels{mkldnn="));
  }
  at::set_num_threads(threads);
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
  test::FakeTimer slowBf16({{"bfloat16", 2.0}, {"mkldnn", 2.0}, {"op-by-op", 0.5}}, 0.01);
  slowBf16.setRule([](const std::string& name) -> std::optional<double> {
    if (name.rfind("regions=", 0) == 0) return 2.0;  // channels-last is slower
    return std::nullopt;
  });
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

TEST_CASE("tunePipeline: ops whose precision timings tie are also tried lowered, as a whole model") {
  // Every op times the same in fp32 and bf16 (ties): op by op they stay
  // fp32, so the op-by-op assignment is the fp32 model; the whole-model A/B
  // also times them all lowered, which wins here.
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer(
      {{"fp32", 1.0}, {"bfloat16", 1.0}, {"mkldnn", 2.0}, {"op-by-op", 2.0}, {"op-by-op, ties bfloat16", 0.5}}, 0.05);
  const Tuned t = tuneFixture(opt, f, "-O3", timer, "");
  CHECK(countKind(t.result, "precision", true) == 0);  // no op won alone
  const tune::DecisionRecord* whole = wholeModel(t.result, "precision");
  REQUIRE(whole);
  const std::string text = rewriters::printPipeline(t.result.pipeline);
  if (std::find(whole->candidates.begin(), whole->candidates.end(), "op-by-op, ties bfloat16") !=
      whole->candidates.end()) {
    CHECK(whole->choice == "op-by-op, ties bfloat16");
    CHECK_THAT(text, Catch::Contains("cast{dtype=bf16,min-channels=0"));
    CHECK_THAT(text, !Catch::Contains("keep-fp32"));
  } else {  // every op lowered is the preset's own graph (native bf16): timed as the preset
    CHECK(whole->choice == "preset");
    CHECK_THAT(text, Catch::Contains("cast{"));
  }
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
  // Where -O3's cast{dtype=auto} lowers to bf16 (native bf16), every op of
  // resnet18 lowered gives the preset's graph: no whole-model check is
  // needed for precision, and none is recorded. Elsewhere (AVX2) the preset
  // stays fp32, so the all-bf16 assignment is checked as a whole, and loses.
  const tune::DecisionRecord* precision = wholeModel(t.result, "precision");
  if (target::autoPrecision("cpu", false, std::nullopt).dtype == target::AutoPrecision::Dtype::Bf16) {
    CHECK(precision == nullptr);
  } else {
    REQUIRE(precision);
    CHECK(precision->choice == "preset");
  }
  CHECK_THAT(t.result.summary(), Catch::Contains("not applied"));
}

TEST_CASE("tunePipeline: a candidate that cannot run on this CPU is out, with the reason, never an error") {
  // The bf16 graph's prepacked convs: on a CPU whose oneDNN has no bf16
  // kernels (AVX2 only; or capped, scripts/avx2-cap.sh) packing a bf16 weight
  // throws ("could not create a primitive descriptor iterator" in 1.13, "bf16
  // path needs the cpu support ..." in 2.x) while the candidates are built.
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  bool packsBf16Here = true;
  try {
    torch::jit::Stack pack{c10::IValue(at::ones({8, 8, 3, 3}, at::kBFloat16)), c10::IValue(),
                           c10::IValue(std::vector<int64_t>{1, 1}), c10::IValue(std::vector<int64_t>{0, 0}),
                           c10::IValue(std::vector<int64_t>{1, 1}), c10::IValue(int64_t{1}),
                           c10::IValue(std::vector<int64_t>{1, 8, 8, 8}), c10::IValue(std::string("none"))};
    c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn_prepacked::conv2d_prepack", "").callBoxed(&pack);
  } catch (const std::exception&) {
    packsBf16Here = false;
  }
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer({{"bfloat16", 0.5}, {"mkldnn", 2.0}, {"prepacked", 0.5}, {"op-by-op", 0.5}}, 0.01);
  Tuned t;
  REQUIRE_NOTHROW(t = tuneFixture(opt, f, "-O3", timer, ""));
  size_t prepackDecisions = 0, out = 0;
  for (const auto& d : t.result.decisions) {
    if (d.kind != "conv-prepack" || d.node == "model") continue;
    ++prepackDecisions;
    if (!d.out.empty()) {
      ++out;
      CHECK(d.out.front().first == "prepacked");
      CHECK_FALSE(d.out.front().second.empty());
      CHECK(d.choice == "dense");
    }
  }
  INFO(t.result.summary());
  CHECK(prepackDecisions == 20);
  if (packsBf16Here) {
    CHECK(out == 0);
    CHECK_THAT(t.result.summary(), !Catch::Contains("out on this machine"));
  } else {
    CHECK(out == 20);
    CHECK_THAT(rewriters::printPipeline(t.result.pipeline), !Catch::Contains("prepacked="));
    CHECK_THAT(t.result.summary(), Catch::Contains("conv-prepack 'prepacked' is out on this machine (20 decisions): "));
  }
  // The tuned pipeline runs and keeps the numerics.
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  rewriters::PassManager(defaultRegistry(), t.result.pipeline).run(opt.model(), ctx);
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
    if (d.source == tune::DecisionRecord::Source::Skipped)
      CHECK(d.choice == (d.kind == "kernel-network" || d.kind == "blocked-network" ? "tuned"
                         : d.kind == "onednn-blocked" || d.kind == "conv-prepack" || d.kind == "linear-prepack"
                             ? "dense"
                             : "conv2d"));
}

TEST_CASE("tunePipeline: packs the conv weights at load where the prepacked kernel measures faster") {
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer faster({{"prepacked", 0.6}, {"op-by-op", 0.8}}, 0.01);
  const Tuned won = tuneFixture(opt, f, "-O2", faster, "");
  CHECK(countKind(won.result, "conv-prepack", true) == 20);
  CHECK(countKind(won.result, "linear-prepack", true) == 1);  // the fc head
  const tune::DecisionRecord* whole = wholeModel(won.result, "conv-prepack");
  REQUIRE(whole);
  CHECK(whole->rewrites());
  const std::string text = rewriters::printPipeline(won.result.pipeline);
  REQUIRE_THAT(text, Catch::Contains("tuned-kernels{prepacked="));
  CHECK(text.find("tuned-kernels{prepacked=") < text.find("fuse-cudnn"));
  // The tuned pipeline packs every conv and the linear and still matches.
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  rewriters::PassManager(defaultRegistry(), won.result.pipeline, test::checkedInstrumentation()).run(opt.model(), ctx);
  CHECK(test::countOps(opt.model().forward(), "mkldnn_prepacked::conv2d_run") == 21);
  CHECK(test::countOps(opt.model().forward(), "aten::conv2d") == 0);
  CHECK(test::countOps(opt.model().forward(), "aten::linear") == 0);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("tunePipeline: packs the linears alone when the packed convs and linears together lose") {
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  // Every conv and the fc win alone; the model with all of them packed loses,
  // the model with only the fc packed wins.
  test::FakeTimer timer({{"prepacked", 0.6}, {"op-by-op", 1.2}, {"op-by-op linears", 0.8}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O2", timer, "");
  CHECK(countKind(t.result, "conv-prepack", true) == 20);
  CHECK(countKind(t.result, "linear-prepack", true) == 1);
  const tune::DecisionRecord* all = wholeModel(t.result, "conv-prepack");
  REQUIRE(all);
  CHECK_FALSE(all->rewrites());
  const tune::DecisionRecord* linearsAlone = wholeModel(t.result, "linear-prepack");
  REQUIRE(linearsAlone);
  CHECK(linearsAlone->rewrites());
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  rewriters::PassManager(defaultRegistry(), t.result.pipeline, test::checkedInstrumentation()).run(opt.model(), ctx);
  CHECK(test::countOps(opt.model().forward(), "mkldnn_prepacked::conv2d_run") == 1);
  CHECK(test::countOps(opt.model().forward(), "aten::linear") == 0);
  CHECK(test::countOps(opt.model().forward(), "aten::conv2d") == 20);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(v.summary);
  CHECK(v.passed);
}

// The whole-model checks of `kind` (preferOpByOp), in order.
std::vector<const tune::DecisionRecord*> wholeModels(const tune::TuneResult& r, const std::string& kind) {
  std::vector<const tune::DecisionRecord*> out;
  for (const auto& d : r.decisions)
    if (d.kind == kind && d.node == "model") out.push_back(&d);
  return out;
}

TEST_CASE("tunePipeline: runs convs on oneDNN's fused kernel where it measures faster than dense and prepacked") {
  if (!kernels::hasFusedConvs() || !kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer({{"fused", 0.5}, {"prepacked", 0.6}, {"op-by-op", 0.8}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O1,channels-last{mode=on}", timer, "");
  // Each conv (channels-last, as fused needs) chose fused; the fc, a
  // linear, chose fused too (oneDNN's linear).
  CHECK(countKind(t.result, "conv-prepack", true) == 20);
  for (const auto& d : t.result.decisions)
    if (d.kind == "conv-prepack" && d.node != "model") {
      CHECK(d.candidates == std::vector<std::string>{"dense", "prepacked", "fused"});
      CHECK(d.choice == "fused");
    }
  const auto whole = wholeModels(t.result, "conv-prepack");
  REQUIRE(whole.size() == 1);
  CHECK(whole[0]->rewrites());
  const std::string text = rewriters::printPipeline(t.result.pipeline);
  CHECK_THAT(text, Catch::Contains("tuned-kernels{fused="));
  CHECK_THAT(text, !Catch::Contains("prepacked="));
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  rewriters::PassManager(defaultRegistry(), t.result.pipeline, test::checkedInstrumentation()).run(opt.model(), ctx);
  // Every conv is a oneDNN conv with its relu (or its residual add and relu) fused.
  CHECK(test::countOps(opt.model().forward(), "mkldnn::_convolution_pointwise") == 20);
  CHECK(test::countOps(opt.model().forward(), "aten::conv2d") == 0);
  CHECK(test::countOps(opt.model().forward(), "aten::relu") + test::countOps(opt.model().forward(), "aten::relu_") == 0);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

namespace tune_pt2 {
// Calls of the fused conv's weight reorder on this thread, while alive.
thread_local size_t tReorders = 0;
class CountReorders {
 public:
  CountReorders() {
    tReorders = 0;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          if (std::string(fn.name()) == "aten::mkldnn_reorder_conv2d_weight") ++tReorders;
          return nullptr;
        }).scopes({at::RecordScope::FUNCTION}));
  }
  ~CountReorders() { at::removeCallback(handle_); }
  size_t count() const { return tReorders; }

 private:
  at::CallbackHandle handle_ = 0;
};
}  // namespace tune_pt2

TEST_CASE("tunePipeline: for a .pt2 OUT, the fused kernels' weight reorders are timed on every call, as it runs them") {
  if (!kernels::hasFusedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  auto tuneFor = [&](bool pt2, size_t& reorders) {
    Optimizer opt = Optimizer::load(f.path);
    rewriters::PassContext ctx;
    ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
    ctx.tensorValuesOnly = pt2;  // OUT is a .pt2 (driver/stages.cpp)
    test::FakeTimer timer({{"fused", 0.5}, {"prepacked", 0.6}, {"op-by-op", 0.8}}, 0.01);
    tune::TuneOptions o;
    o.timer = &timer;
    o.budgetSeconds = 1000;
    tune_pt2::CountReorders counter;
    tune::TuneResult r = tune::tunePipeline(opt.model(), parsePipelineOrPreset("-O1,channels-last{mode=on}"),
                                            defaultRegistry(), ctx, o);
    reorders = counter.count();
    return r;
  };
  size_t once = 0, everyCall = 0;
  const tune::TuneResult file = tuneFor(false, once);
  const tune::TuneResult program = tuneFor(true, everyCall);
  // A TorchScript OUT reorders once per candidate built and per whole-model
  // export (at load); a program in every timed call of a fused conv.
  CHECK(once > 0);
  CHECK(everyCall > 3 * once);
  CHECK_THAT(program.context, Catch::EndsWith("| packs on every call (.pt2)"));
  CHECK_THAT(file.context, !Catch::Contains("packs on every call"));
  // No packed op contexts in a program: fused against dense only.
  for (const auto& d : program.decisions)
    if (d.kind == "conv-prepack" && d.node != "model")
      CHECK(d.candidates == std::vector<std::string>{"dense", "fused"});
}

TEST_CASE("tunePipeline: keeps the prepacked convs when the fused ones win alone but lose together") {
  if (!kernels::hasFusedConvs() || !kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer(
      {{"fused", 0.5}, {"prepacked", 0.6}, {"op-by-op", 1.2}, {"op-by-op without fused convs", 0.8}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O1,channels-last{mode=on}", timer, "");
  const auto whole = wholeModels(t.result, "conv-prepack");
  REQUIRE(whole.size() == 2);
  CHECK_FALSE(whole[0]->rewrites());
  CHECK(whole[1]->rewrites());
  const std::string text = rewriters::printPipeline(t.result.pipeline);
  CHECK_THAT(text, Catch::Contains("tuned-kernels{prepacked="));
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  rewriters::PassManager(defaultRegistry(), t.result.pipeline, test::checkedInstrumentation()).run(opt.model(), ctx);
  // The convs packed (their second choice); the fc stays on oneDNN's linear,
  // its own choice.
  CHECK(test::countOps(opt.model().forward(), "mkldnn_prepacked::conv2d_run") == 20);
  CHECK(test::countOps(opt.model().forward(), "mkldnn::_convolution_pointwise") == 0);
  CHECK(test::countOps(opt.model().forward(), "mkldnn::_linear_pointwise") == 1);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("tunePipeline: leaves convs in oneDNN regions to the regions, not to prepacking") {
  if (!kernels::hasPrepackedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn_prepacked operators");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer both({{"blocked", 0.6}, {"prepacked", 0.6}, {"op-by-op", 0.8}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O2", both, "");
  // resnet18's one region holds every conv: none is left dense to pack,
  // only the fc linear after the region.
  CHECK(countKind(t.result, "conv-prepack", false) == 0);
  CHECK(countKind(t.result, "linear-prepack", true) == 1);
  const std::string text = rewriters::printPipeline(t.result.pipeline);
  CHECK_THAT(text, Catch::Contains("onednn-blocked"));
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  rewriters::PassManager(defaultRegistry(), t.result.pipeline, test::checkedInstrumentation()).run(opt.model(), ctx);
  CHECK(test::countOps(opt.model().forward(), "mkldnn_prepacked::conv2d_run") == 1);
  CHECK(test::countOps(opt.model().forward(), "aten::mkldnn_convolution") == 20);
}

TEST_CASE("tunePipeline: runs conv regions on oneDNN tensors when the whole model measures faster") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer faster({{"blocked", 0.6}}, 0.01);
  const Tuned won = tuneFixture(opt, f, "-O2", faster, "");
  const tune::DecisionRecord* d = wholeModel(won.result, "onednn-blocked");
  REQUIRE(d);
  CHECK(d->rewrites());
  CHECK(d->candidates == std::vector<std::string>{"dense", "blocked"});
  const std::string text = rewriters::printPipeline(won.result.pipeline);
  REQUIRE_THAT(text, Catch::Contains("onednn-blocked"));
  CHECK(text.find("onednn-blocked") < text.find("fuse-cudnn"));
  // The tuned pipeline converts resnet18's one region and still matches.
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  rewriters::PassManager(defaultRegistry(), won.result.pipeline, test::checkedInstrumentation()).run(opt.model(), ctx);
  CHECK(test::countOps(opt.model().forward(), "aten::mkldnn_reorder_conv2d_weight") == 20);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);

  // Slower: not added.
  Optimizer again = Optimizer::load(f.path);
  test::FakeTimer slower({{"blocked", 1.5}}, 0.01);
  const Tuned lost = tuneFixture(again, f, "-O2", slower, "");
  REQUIRE(wholeModel(lost.result, "onednn-blocked"));
  CHECK_FALSE(wholeModel(lost.result, "onednn-blocked")->rewrites());
  CHECK_THAT(rewriters::printPipeline(lost.result.pipeline), !Catch::Contains("onednn-blocked"));
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

namespace {

// The channels-last regions of a fixture after -O1 (what -O2's channels-last
// sees), as the pass names them.
std::vector<std::string> regionIds(const test::Fixture& f) {
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1", &ctx);
  std::vector<std::string> ids;
  for (const auto& r : layout::channelsLastRegions(opt.model().forward(), ctx)) ids.push_back(r.id);
  return ids;
}

// "regions=a;b" -> {a, b}; "off" -> {}; anything else: not a layout candidate.
std::optional<std::set<std::string>> regionSet(const std::string& name) {
  if (name == "off") return std::set<std::string>{};
  if (name.rfind("regions=", 0) != 0) return std::nullopt;
  return kernels::parseNameList(name.substr(8));
}

std::vector<const tune::DecisionRecord*> layoutDecisions(const tune::TuneResult& r) {
  std::vector<const tune::DecisionRecord*> out;
  for (const auto& d : r.decisions)
    if (d.kind == "channels-last") out.push_back(&d);
  return out;
}

}  // namespace

TEST_CASE("tunePipeline: decides channels-last per region and converts only the region that wins") {
  const auto& f = test::fixture("two_conv_regions");
  const std::vector<std::string> ids = regionIds(f);
  REQUIRE(ids.size() == 2);
  const std::string a = ids[0], b = ids[1];
  // Region a is faster in NHWC, region b slower; both together lose.
  auto rule = [&](const std::string& name) -> std::optional<double> {
    auto set = regionSet(name);
    if (!set) return std::nullopt;
    return 10.0 - 2.0 * static_cast<double>(set->count(a)) + 3.0 * static_cast<double>(set->count(b));
  };
  const std::string cache = tempCache("regions.json");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer({}, 0.01);
  timer.setRule(rule);
  const Tuned first = tuneFixture(opt, f, "-O2", timer, cache);
  const auto decisions = layoutDecisions(first.result);
  REQUIRE(decisions.size() == 2);
  std::map<std::string, const tune::DecisionRecord*> byRegion;
  for (const auto* d : decisions) byRegion[d->node] = d;
  REQUIRE(byRegion.count(a));
  REQUIRE(byRegion.count(b));
  CHECK(byRegion[a]->choice == "on");
  CHECK(byRegion[a]->source == tune::DecisionRecord::Source::Measured);
  CHECK(byRegion[a]->ratio < 0.9);  // 8 ms / 10 ms
  CHECK(byRegion[b]->choice == "off");
  CHECK(byRegion[b]->ratio > 1.1);  // 11 ms / 8 ms
  CHECK(byRegion[a]->signature != byRegion[b]->signature);
  CHECK_THAT(byRegion[a]->line(), Catch::Contains("channels-last %" + a + ": on"));
  // What -O2's mode=auto converts (both, the baseline; also all on) vs all
  // off (wins), then a: off vs {a} (wins), then b: {a} vs {a, b} (loses).
  std::vector<std::string> layoutNames;
  for (const auto& n : timer.names())
    if (regionSet(n)) layoutNames.push_back(n);
  CHECK(layoutNames == std::vector<std::string>{"regions=" + a + ";" + b, "off", "regions=" + a});
  const std::string text = rewriters::printPipeline(first.result.pipeline);
  CHECK_THAT(text, Catch::Contains("channels-last{mode=on,regions=" + a + "}"));
  CHECK_THAT(first.result.summary(), Catch::Contains("channels-last %" + b + ": off kept"));

  // The tuned pipeline converts region a only, every edit logged, numerics kept.
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  rewriters::PassManager pm(defaultRegistry(), first.result.pipeline, test::checkedInstrumentation());
  auto report = pm.run(opt.model(), ctx);
  CHECK(test::counter(report, "channels-last", "regions") == 1);
  CHECK(test::counter(report, "channels-last", "unselected-regions") == 1);
  CHECK(test::counter(report, "channels-last", "convs") == 2);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);

  // The cache holds both decisions under their region signatures...
  const tune::TuningCache stored = tune::TuningCache::open(cache);
  const auto& inContext = stored.json().at("contexts").at(first.result.context).at("decisions");
  CHECK(inContext.at(byRegion[a]->signature).at("choice") == "on");
  CHECK(inContext.at(byRegion[b]->signature).at("choice") == "off");
  // ...and a second run times nothing and gives the same pipeline.
  Optimizer again = Optimizer::load(f.path);
  test::FakeTimer second({}, 0.01);
  second.setRule(rule);
  const Tuned warm = tuneFixture(again, f, "-O2", second, cache);
  CHECK(warm.samples == 0);
  CHECK(warm.result.measured == 0);
  for (const auto* d : layoutDecisions(warm.result)) CHECK(d->source == tune::DecisionRecord::Source::Cached);
  CHECK(rewriters::printPipeline(warm.result.pipeline) == text);
}

TEST_CASE("tunePipeline: a model with one channels-last region costs one A/B") {
  const auto& f = test::fixture("resnet18_script");
  const std::vector<std::string> ids = regionIds(f);
  REQUIRE(ids.size() == 1);
  test::FakeTimer timer({}, 0.01);
  timer.setRule([](const std::string& name) -> std::optional<double> {
    auto set = regionSet(name);
    if (!set) return std::nullopt;
    return set->empty() ? 10.0 : 8.0;
  });
  Optimizer opt = Optimizer::load(f.path);
  const Tuned t = tuneFixture(opt, f, "-O2", timer, "");
  const auto decisions = layoutDecisions(t.result);
  REQUIRE(decisions.size() == 1);
  CHECK(decisions[0]->node == ids[0]);
  CHECK(decisions[0]->choice == "on");
  std::vector<std::string> layoutNames;
  for (const auto& n : timer.names())
    if (regionSet(n)) layoutNames.push_back(n);
  CHECK(layoutNames == std::vector<std::string>{"regions=" + ids[0], "off"});  // the preset's first
  // Both sampled once per round, plus the two warm-up calls.
  CHECK(timer.samplesOf("off") == static_cast<size_t>(decisions[0]->rounds) + 2);
  CHECK_THAT(rewriters::printPipeline(t.result.pipeline), Catch::Contains("channels-last{mode=on,regions=" + ids[0] + "}"));
}

TEST_CASE("tunePipeline: a model without conv regions keeps channels-last off without timing it") {
  const auto& f = test::fixture("transformer_block");
  test::FakeTimer timer({}, 0.01);
  Optimizer opt = Optimizer::load(f.path);
  const Tuned t = tuneFixture(opt, f, "-O2", timer, "");
  const auto decisions = layoutDecisions(t.result);
  REQUIRE(decisions.size() == 1);
  CHECK(decisions[0]->source == tune::DecisionRecord::Source::Skipped);
  CHECK(timer.samplesOf("off") == 0);
  CHECK_THAT(rewriters::printPipeline(t.result.pipeline), Catch::Contains("channels-last{mode=off"));
}

TEST_CASE("regionSignature: the same region on other shapes, or another region, is another key") {
  auto signatures = [](const std::string& fixture, const std::vector<int64_t>& shape) {
    const auto& f = test::fixture(fixture);
    Optimizer opt = Optimizer::load(f.path);
    rewriters::PassContext ctx;
    ctx.exampleInputs = std::vector<c10::IValue>{torch::randn(shape)};
    opt.run("-O1", &ctx);
    std::vector<std::string> out;
    for (const auto& r : layout::channelsLastRegions(opt.model().forward(), ctx)) {
      std::string why;
      auto sig = tune::regionSignature(r.nodes, why);
      INFO(why);
      REQUIRE(sig);
      out.push_back(*sig);
    }
    return out;
  };
  const auto r64 = signatures("resnet18_script", {1, 3, 64, 64});
  REQUIRE(r64.size() == 1);
  CHECK(signatures("resnet18_script", {1, 3, 64, 64}) == r64);  // deterministic, names not in it
  CHECK(signatures("resnet18_script", {1, 3, 32, 32}) != r64);
  CHECK_THAT(r64[0], Catch::StartsWith("aten::conv2d(float32[1,3,64,64]:cf, const float32[64,3,7,7]:cf"));
  const auto two = signatures("two_conv_regions", {2, 3, 16, 16});
  REQUIRE(two.size() == 2);
  CHECK(two[0] != two[1]);
  // Without shapes there is no signature (the tuner keys such a region by its model).
  const auto& f = test::fixture("two_conv_regions");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext noShapes;
  opt.run("canonicalize,fold-conv-bn", &noShapes);
  const auto regions = layout::channelsLastRegions(opt.model().forward(), noShapes);
  REQUIRE_FALSE(regions.empty());
  std::string why;
  CHECK_FALSE(tune::regionSignature(regions[0].nodes, why));
  CHECK_THAT(why, Catch::Contains("unknown"));
}

TEST_CASE("tunePipeline: regions left when the budget is spent keep the first A/B's verdict, uncached") {
  const auto& f = test::fixture("two_conv_regions");
  const std::vector<std::string> ids = regionIds(f);
  REQUIRE(ids.size() == 2);
  const std::string a = ids[0], b = ids[1];
  test::FakeTimer timer({}, 0.01);
  timer.setRule([&](const std::string& name) -> std::optional<double> {
    auto set = regionSet(name);
    if (!set) return std::nullopt;
    return 100.0 - 20.0 * static_cast<double>(set->count(a)) + 30.0 * static_cast<double>(set->count(b));
  });
  const std::string cache = tempCache("regions_budget.json");
  Optimizer opt = Optimizer::load(f.path);
  const Tuned t = tuneFixture(opt, f, "-O2", timer, cache, /*budget=*/2.0);
  CHECK(t.result.budgetSpent);
  std::map<std::string, const tune::DecisionRecord*> byRegion;
  for (const auto* d : layoutDecisions(t.result)) byRegion[d->node] = d;
  REQUIRE(byRegion.count(a));
  REQUIRE(byRegion.count(b));
  // All on lost to all off; b never got its own A/B: off, as the first A/B left it.
  CHECK(byRegion[b]->choice == "off");
  CHECK_THAT(byRegion[b]->note, Catch::Contains("kept as the first A/B left it"));
  const auto& stored = tune::TuningCache::open(cache).json().at("contexts").at(t.result.context).at("decisions");
  CHECK_FALSE(stored.contains(byRegion[b]->signature));
  CHECK(t.result.seconds <= 2.0 + 0.5);
}

TEST_CASE("tunePipeline: when all regions on wins, a region that loses on its own is turned off") {
  const auto& f = test::fixture("two_conv_regions");
  const std::vector<std::string> ids = regionIds(f);
  REQUIRE(ids.size() == 2);
  const std::string a = ids[0], b = ids[1];
  // a saves 3 ms, b costs 1 ms: all on (8 ms) beats all off (10 ms), {a} (7 ms) beats both.
  test::FakeTimer timer({}, 0.01);
  timer.setRule([&](const std::string& name) -> std::optional<double> {
    auto set = regionSet(name);
    if (!set) return std::nullopt;
    return 10.0 - 3.0 * static_cast<double>(set->count(a)) + 1.0 * static_cast<double>(set->count(b));
  });
  Optimizer opt = Optimizer::load(f.path);
  const Tuned t = tuneFixture(opt, f, "-O2", timer, "");
  std::map<std::string, std::string> choice;
  for (const auto* d : layoutDecisions(t.result)) choice[d->node] = d->choice;
  CHECK(choice == std::map<std::string, std::string>{{a, "on"}, {b, "off"}});
  std::vector<std::string> layoutNames;
  for (const auto& n : timer.names())
    if (regionSet(n)) layoutNames.push_back(n);
  // all on (the preset's) vs all off; a: {a, b} vs {b}; b: {a, b} vs {a}.
  CHECK(layoutNames == std::vector<std::string>{"regions=" + a + ";" + b, "off", "regions=" + b, "regions=" + a});
  CHECK_THAT(rewriters::printPipeline(t.result.pipeline), Catch::Contains("channels-last{mode=on,regions=" + a + "}"));
}

TEST_CASE("tunePipeline: a traced model's convs are offered the fused network too") {
  if (!kernels::hasFusedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  // Traced, its convs are aten::_convolution until canonicalize: the
  // network alternatives were once never built for it.
  const auto& f = test::fixture("resnet18_trace");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer fusedWins({{"fused-network", 0.5}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O3", fusedWins, "");
  const tune::DecisionRecord* network = wholeModel(t.result, "kernel-network");
  REQUIRE(network);
  CHECK(network->choice == "fused-network");
  CHECK_THAT(rewriters::printPipeline(t.result.pipeline), Catch::Contains("tuned-kernels{fused=*}"));
  // The layout pass in the form it declares for the whole network
  // (PassEffects::everywhere): every region, whatever the tuner chose per
  // region before.
  CHECK_THAT(rewriters::printPipeline(t.result.pipeline), Catch::Contains("channels-last{mode=on}"));
}

TEST_CASE("tunePipeline: the fused network adds the declared layout pass to a pipeline without one") {
  if (!kernels::hasFusedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer fusedWins({{"fused-network", 0.5}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O1", fusedWins, "");
  const tune::DecisionRecord* network = wholeModel(t.result, "kernel-network");
  REQUIRE(network);
  CHECK(network->choice == "fused-network");
  const std::string printed = rewriters::printPipeline(t.result.pipeline);
  CHECK_THAT(printed, Catch::Contains("channels-last{mode=on}"));
  CHECK(printed.find("channels-last") < printed.find("tuned-kernels{fused=*}"));
}

TEST_CASE("tunePipeline: the fused network at the tuned precision keeps the fp32 ops off oneDNN") {
  if (!kernels::hasFusedConvs()) {
    WARN("SKIPPED: this LibTorch has no mkldnn::_convolution_pointwise (LibTorch 2.x has it)");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  // The precision as --tune leaves it in cast's keep-fp32 (given here: the
  // stem conv and the classifier stay fp32).
  std::set<std::string> fp32Ops;
  {
    Optimizer folded = Optimizer::load(f.path);
    rewriters::PassContext ctx;
    ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
    folded.run("-O1", &ctx);
    folded.model().forward().walk([&](ir::Node* n) {
      if ((n->is("aten::conv2d") && fp32Ops.empty()) || n->is("aten::linear")) fp32Ops.insert(n->output()->name());
    });
  }
  REQUIRE(fp32Ops.size() == 2);
  const std::string keep = kernels::joinNameList(fp32Ops);
  rewriters::Pipeline given = parsePipelineOrPreset("-O3");
  for (auto& e : given.elements)
    if (e.name == "cast") e.setOption("keep-fp32", keep);
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer({{"fused-network-tuned-precision", 0.3}}, 0.01);
  const Tuned t = tuneFixture(opt, f, rewriters::printPipeline(given), timer, "");
  const tune::DecisionRecord* network = wholeModel(t.result, "kernel-network");
  REQUIRE(network);
  CHECK(network->choice == "fused-network-tuned-precision");
  std::string kept, skip, fused;
  for (const auto& e : t.result.pipeline.elements) {
    if (e.name == "cast") kept = e.option("keep-fp32");
    if (e.name == "tuned-kernels") skip = e.option("skip"), fused = e.option("fused");
  }
  CHECK(fused == "*");
  CHECK(kept == keep);
  CHECK(skip == keep);
  // The tuned pipeline runs: the ops kept fp32 stay aten::conv2d and
  // aten::linear, every other conv is fused.
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  Optimizer again = Optimizer::load(f.path);
  rewriters::PassManager(defaultRegistry(), t.result.pipeline).run(again.model(), ctx);
  const ir::Graph& g = again.model().forward();
  CHECK(test::countOps(g, "aten::conv2d") == 1);
  CHECK(test::countOps(g, "aten::linear") == 1);
  CHECK(test::countOps(g, "mkldnn::_convolution_pointwise") == 19);
  g.walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") || n->is("aten::linear")) CHECK(fp32Ops.count(n->output()->name()));
  });
  auto v = again.verify(f.inputs, verify::Tolerance::forPrecision(c10::ScalarType::BFloat16), 1);
  INFO(v.summary);
  CHECK(v.passed);
}

namespace {

// transformer_block's linears in -O1's model, by the post-op fused= would
// give them: fc1 (its GELU), proj and fc2 (their residual adds).
std::map<kernels::FusedPostOpKind, std::set<std::string>> linearsByPostOp(const test::Fixture& f) {
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1", &ctx);
  std::map<kernels::FusedPostOpKind, std::set<std::string>> out;
  opt.model().forward().walk([&](ir::Node* n) {
    if (n->is("aten::linear")) out[kernels::fusedPostOpKind(n)].insert(n->output()->name());
  });
  return out;
}

// The model `pipeline` makes of fixture `f`.
Optimizer runTuned(const test::Fixture& f, const rewriters::Pipeline& pipeline) {
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassManager(defaultRegistry(), pipeline).run(opt.model(), ctx);
  return opt;
}

}  // namespace

TEST_CASE("tunePipeline: a transformer's linears that absorb a post-op are offered fused as a whole model") {
  const auto& f = test::fixture("transformer_block");  // 6 linears: fc1 + GELU, proj and fc2 + residual adds
  Optimizer opt = Optimizer::load(f.path);
  if (!kernels::hasFusedLinears()) {
    // 1.13: no oneDNN linear, so no whole-model alternative and no A/B.
    test::FakeTimer timer({}, 0.01);
    const Tuned t = tuneFixture(opt, f, "-O1", timer, "");
    CHECK_FALSE(wholeModel(t.result, "kernel-network"));
    WARN("SKIPPED: this LibTorch has no mkldnn::_linear_pointwise (LibTorch 2.x has it); no alternative was offered");
    return;
  }
  auto byPostOp = linearsByPostOp(f);
  REQUIRE(byPostOp[kernels::FusedPostOpKind::Activation].size() == 1);
  REQUIRE(byPostOp[kernels::FusedPostOpKind::ResidualAdd].size() == 2);
  REQUIRE(byPostOp[kernels::FusedPostOpKind::None].size() == 3);  // q, k, v
  const std::string fc1 = *byPostOp[kernels::FusedPostOpKind::Activation].begin();
  // -O1 tuned with `timer`, whose whole-model A/B must choose `winner`.
  auto tunedTo = [&](const std::string& winner, test::FakeTimer& timer) {
    Tuned t = tuneFixture(opt, f, "-O1", timer, "");
    const tune::DecisionRecord* network = wholeModel(t.result, "kernel-network");
    REQUIRE(network);
    CHECK(network->choice == winner);
    return t;
  };

  SECTION("the linear + GELU pair alone") {
    test::FakeTimer timer({{"fused-activations", 0.5}}, 0.01);
    const Tuned t = tunedTo("fused-activations", timer);
    // Both alternatives were timed in one A/B beside the tuned model (per
    // op, every linear stayed aten::linear: nothing else was named).
    CHECK(timer.samplesOf("fused-post-ops") > 0);
    CHECK(timer.samplesOf("fused-network") == 0);  // no conv: the conv networks are not built
    CHECK_THAT(rewriters::printPipeline(t.result.pipeline), Catch::Contains("tuned-kernels{fused=" + fc1 + "}"));
    Optimizer tuned = runTuned(f, t.result.pipeline);
    const ir::Graph& g = tuned.model().forward();
    CHECK(test::countOps(g, "mkldnn::_linear_pointwise") == 1);
    CHECK(test::countOps(g, "aten::gelu") == 0);
    CHECK(test::countOps(g, "aten::linear") == 5);
    g.walk([&](ir::Node* n) {
      if (n->is("mkldnn::_linear_pointwise")) CHECK(ir::OpView::of(n).literal("attr")->as<std::string>() == "gelu");
    });
    auto v = tuned.verify(f.inputs, verify::Tolerance{}, 2);
    INFO(v.summary);
    CHECK(v.passed);
  }
  SECTION("with the residual adds") {
    test::FakeTimer timer({{"fused-post-ops", 0.5}}, 0.01);
    const Tuned t = tunedTo("fused-post-ops", timer);
    Optimizer tuned = runTuned(f, t.result.pipeline);
    const ir::Graph& g = tuned.model().forward();
    size_t binary = 0;
    g.walk([&](ir::Node* n) { binary += n->is("mkldnn::_linear_pointwise") && n->overload() == "binary"; });
    CHECK(test::countOps(g, "mkldnn::_linear_pointwise") == 3);
    CHECK(binary == 2);
    CHECK(test::countOps(g, "aten::linear") == 3);
    CHECK(test::countOps(g, "aten::gelu") == 0);
    auto v = tuned.verify(f.inputs, verify::Tolerance{}, 2);
    INFO(v.summary);
    CHECK(v.passed);
  }
  SECTION("faster at 1 thread, slower at 2: not kept, and the record says so") {
    const int threads = at::get_num_threads();
    at::set_num_threads(1);
    test::FakeTimer timer({{"fused-activations", 0.5}}, 0.01);
    timer.setRule([](const std::string& name) -> std::optional<double> {
      if (at::get_num_threads() == 2 && name == "fused-activations") return 1.5;
      return std::nullopt;
    });
    const Tuned t = tuneFixture(opt, f, "-O1", timer, "", 1000, {2});
    at::set_num_threads(threads);
    const tune::DecisionRecord* network = wholeModel(t.result, "kernel-network");
    REQUIRE(network);
    CHECK(network->choice == "tuned");
    REQUIRE_FALSE(network->atThreads.empty());
    CHECK(network->atThreads[0].challenger == "fused-activations");
    CHECK(network->atThreads[0].slower);
    CHECK_THAT(rewriters::printPipeline(t.result.pipeline), !Catch::Contains("tuned-kernels"));
  }
}

TEST_CASE("tunePipeline: linears with no post-op to absorb get no whole-model alternative") {
  // mha_fast_path: its one aten::linear reads the residual sum and is the
  // model's output; the attention's projections are inside one op.
  const auto& f = test::fixture("mha_fast_path");
  Optimizer opt = Optimizer::load(f.path);
  test::FakeTimer timer({{"fused-activations", 0.5}, {"fused-post-ops", 0.5}}, 0.01);
  const Tuned t = tuneFixture(opt, f, "-O1", timer, "");
  CHECK_FALSE(wholeModel(t.result, "kernel-network"));
  CHECK(timer.samplesOf("fused-activations") == 0);
  CHECK(timer.samplesOf("fused-post-ops") == 0);
}
