// The tunable registry and the tuner's generic driving (tune/tunable.h): the
// tuner knows no pass by name, so every tunable pass registers its tunable,
// element tunables get their pass's element, offered ones run once, where
// and in the order they declare.
#include "tests/support/pass_test.h"
#include "tests/tune/fake_timer.h"
#include "tune/tunable.h"
#include "tune/tune_model.h"

#include <catch2/catch.hpp>
#include <torch/script.h>

#include <set>
#include <stdexcept>

using namespace ptopt;

namespace {

tune::Tunable elementTunable(const std::string& kind, const std::string& pass) {
  tune::Tunable t;
  t.kind = kind;
  t.pass = pass;
  t.tuneElement = [](tune::TuningSession& s, const rewriters::PipelineElement& e) { s.keep(e); };
  return t;
}

// An offered tunable that records when it ran: the passes kept before it.
tune::Tunable offeredTunable(const std::string& kind, std::vector<std::string> before,
                             std::vector<tune::TuningAspect> settles, std::vector<tune::TuningAspect> buildsOn,
                             std::vector<std::string>& log) {
  tune::Tunable t;
  t.kind = kind;
  t.offeredBefore = std::move(before);
  t.settles = std::move(settles);
  t.buildsOn = std::move(buildsOn);
  t.offer = [kind, &log](tune::TuningSession& s) {
    std::string kept;
    for (const auto& e : s.tunedSoFar().elements) kept += (kept.empty() ? "" : ",") + e.name;
    log.push_back(kind + " after [" + kept + "]");
  };
  return t;
}

torch::jit::Module tinyModule() {
  torch::jit::Module m("Tiny");
  m.register_attribute("training", c10::BoolType::get(), true);
  m.define(R"(
def forward(self, x):
    return torch.relu(x) + 1.0
)");
  return m;
}

// relu(x) twice: cse merges the twins, so a pipeline with it and one
// without give two graphs.
torch::jit::Module twinsModule() {
  torch::jit::Module m("Twins");
  m.register_attribute("training", c10::BoolType::get(), false);
  m.define(R"(
def forward(self, x):
    return torch.relu(x) + torch.relu(x)
)");
  return m;
}

}  // namespace

TEST_CASE("every machine-dependent pass registers its tunable", "[tune][tunable]") {
  std::set<std::string> kinds, passes;
  for (const auto& t : tune::tunables(defaultRegistry())) {
    kinds.insert(t->kind);
    if (t->tunesElements()) passes.insert(t->pass);
  }
  CHECK(kinds == std::set<std::string>{"blocked-network", "bn-to-affine", "channels-last", "conv-kernel", "conv-prepack",
                                       "fuse-cudnn", "int8-activations", "kernel-network", "onednn-blocked",
                                       "precision"});
  CHECK(passes == std::set<std::string>{"bn-to-affine", "cast", "channels-last", "fuse-cudnn"});
}

TEST_CASE("TunableRegistryRefusesDuplicates", "[tune][tunable]") {
  rewriters::PassRegistry r;
  tune::addTunable(r, elementTunable("a", "cse"));
  CHECK_THROWS_AS(tune::addTunable(r, elementTunable("a", "dce")), std::logic_error);   // the same kind
  CHECK_THROWS_AS(tune::addTunable(r, elementTunable("b", "cse")), std::logic_error);   // the same pass
  tune::Tunable neither;
  neither.kind = "c";
  CHECK_THROWS_AS(tune::addTunable(r, neither), std::logic_error);  // neither tunes an element nor offers
  CHECK(tune::tunables(r).size() == 1);
}

namespace {

// --tune of `pipeline` with `r`'s tunables on the tiny module, on a fake clock.
tune::TuneResult tuneTiny(const rewriters::PassRegistry& r, const std::string& pipeline) {
  Optimizer opt = Optimizer::fromModule(tinyModule());
  rewriters::PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 3})};
  test::FakeTimer timer({});
  tune::TuneOptions o;
  o.timer = &timer;
  return tune::tunePipeline(opt.model(), rewriters::parsePipeline(pipeline, r), r, ctx, o);
}

}  // namespace

TEST_CASE("offered tunables run once, before the passes they name, in their declared order", "[tune][tunable]") {
  std::vector<std::string> log;
  rewriters::PassRegistry r;
  rewriters::registerGenericPasses(r);
  // Registered in the opposite order of what they build on: the declared
  // aspects order them (no tunable names another).
  using A = tune::TuningAspect;
  tune::addTunable(r, offeredTunable("packing", {"dce"}, {A::WeightPacking}, {A::ConvKernels, A::ConvLayout}, log));
  tune::addTunable(r, offeredTunable("layout", {"dce"}, {A::ConvLayout}, {A::ConvKernels}, log));
  tune::addTunable(r, offeredTunable("kernels", {"dce"}, {A::ConvKernels}, {}, log));
  tune::addTunable(r, offeredTunable("at-the-end", {"not-in-the-pipeline"}, {}, {}, log));
  const auto tuned = tuneTiny(r, "cse,dce,cse,dce");
  CHECK(log == std::vector<std::string>{"kernels after [cse]", "layout after [cse]", "packing after [cse]",
                                        "at-the-end after [cse,dce,cse,dce]"});
  CHECK(rewriters::printPipeline(tuned.pipeline) == "cse,dce,cse,dce");
}

TEST_CASE("offered tunables that build on what each other settles are a cycle, named", "[tune][tunable]") {
  std::vector<std::string> log;
  rewriters::PassRegistry r;
  rewriters::registerGenericPasses(r);
  using A = tune::TuningAspect;
  tune::addTunable(r, offeredTunable("one", {"dce"}, {A::ConvKernels}, {A::ConvLayout}, log));
  tune::addTunable(r, offeredTunable("two", {"dce"}, {A::ConvLayout}, {A::ConvKernels}, log));
  CHECK_THROWS_WITH(tuneTiny(r, "cse,dce"), Catch::Contains("one, two build on what each other settles"));
  CHECK(log.empty());
}

TEST_CASE("a proposed whole pipeline replaces the tuned one only when it wins the whole-model A/B", "[tune][tunable]") {
  // relu(x) twice: the alternative's cse merges the twins (another graph),
  // timed against the tuned model, which kept both.
  auto tuneWith = [](double alternativeMs, double tunedMs) {
    rewriters::PassRegistry r;
    rewriters::registerGenericPasses(r);
    tune::Tunable t;
    t.kind = "whole";
    t.alternatives = [](tune::TuningSession&, const rewriters::Pipeline& given) {
      rewriters::Pipeline p = given;
      rewriters::PipelineElement cse;
      cse.name = "cse";
      p.elements.insert(p.elements.begin(), cse);
      rewriters::Pipeline same = given;  // the tuned graph again: not timed
      return std::vector<std::pair<std::string, rewriters::Pipeline>>{{"same", same}, {"other", p}};
    };
    tune::addTunable(r, t);
    Optimizer opt = Optimizer::fromModule(twinsModule());
    rewriters::PassContext ctx;
    ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 3})};
    test::FakeTimer timer({{"tuned", tunedMs}, {"other", alternativeMs}, {"same", 0.01}});
    tune::TuneOptions o;
    o.timer = &timer;
    auto tuned = tune::tunePipeline(opt.model(), rewriters::parsePipeline("dce", r), r, ctx, o);
    CHECK(timer.samplesOf("same") == 0);
    return std::make_pair(rewriters::printPipeline(tuned.pipeline), tuned);
  };
  {
    const auto [pipeline, result] = tuneWith(0.5, 1.0);
    CHECK(pipeline == "cse,dce");
    REQUIRE(result.decisions.size() == 1);
    CHECK(result.decisions[0].kind == "whole");
    CHECK(result.decisions[0].choice == "other");
  }
  {
    const auto [pipeline, result] = tuneWith(1.0, 1.0);  // no win beyond noise: the tuned pipeline stays
    CHECK(pipeline == "dce");
    REQUIRE(result.decisions.size() == 1);
    CHECK(result.decisions[0].choice == "tuned");
  }
}

TEST_CASE("TunableRegistryRefusesATunableOfTwoKinds", "[tune][tunable]") {
  rewriters::PassRegistry r;
  tune::Tunable both = elementTunable("a", "cse");
  both.alternatives = [](tune::TuningSession&, const rewriters::Pipeline&) {
    return std::vector<std::pair<std::string, rewriters::Pipeline>>{};
  };
  CHECK_THROWS_AS(tune::addTunable(r, both), std::logic_error);
}

TEST_CASE("preferAmong times each distinct assignment once, against the preset's", "[tune][tunable]") {
  // The preset runs cse (the twin relus merge); "absent" leaves the element
  // out (another graph); "preset again" and "absent again" build graphs
  // already timed, so they are not timed again and are chosen with theirs.
  auto choose = [](double absentMs) {
    rewriters::PassRegistry r;
    rewriters::registerGenericPasses(r);
    size_t kept = 99;
    tune::Tunable t;
    t.kind = "choice";
    t.pass = "cse";
    t.tuneElement = [&kept](tune::TuningSession& s, const rewriters::PipelineElement& e) {
      kept = s.preferAmong("choice", e, {{"preset again", e}, {"absent", std::nullopt}, {"absent again", std::nullopt}});
      if (kept == 0 || kept == 1) s.keep(e);
    };
    tune::addTunable(r, t);
    Optimizer opt = Optimizer::fromModule(twinsModule());
    rewriters::PassContext ctx;
    ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 3})};
    test::FakeTimer timer({{"preset", 1.0}, {"absent", absentMs}});
    tune::TuneOptions o;
    o.timer = &timer;
    auto tuned = tune::tunePipeline(opt.model(), rewriters::parsePipeline("cse", r), r, ctx, o);
    CHECK(timer.samplesOf("preset again") == 0);
    CHECK(timer.samplesOf("absent again") == 0);
    CHECK(timer.samplesOf("absent") > 0);
    return std::make_pair(kept, rewriters::printPipeline(tuned.pipeline));
  };
  const auto [faster, fasterPipeline] = choose(0.5);
  CHECK(faster == 2);  // "absent", the first of its graph
  CHECK(fasterPipeline.empty());
  const auto [even, evenPipeline] = choose(1.0);  // within noise: the preset's model, as "preset again" spells it
  CHECK(even == 1);
  CHECK(evenPipeline == "cse");
}
