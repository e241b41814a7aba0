// channels-last: structure on real models (resnet18: one entry conversion,
// none inside residual blocks), the view/flatten/permute-after-conv
// fixtures, conv1d left alone, mode=auto/on/off, and -O2 on every fixture:
// numerics within (1e-4, 1e-5), tensor outputs in the contiguous format
// (keep-output-layout=true), files saved for the Python reload check
// (python.reload_o2); _convolution's groups read by name; the edit log
// proven complete on every fixture (Instrumentation::checkEditLog); and
// regions= (the regions named by their first conv, converted one by one).
#include "layout/channels_last.h"
#include "rewriters/constants.h"
#include "rewriters/pipeline.h"
#include "tests/support/checked_run.h"
#include "target/capabilities.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

using namespace ptopt;

namespace {

std::string o2Dir() { return test::exportedDir() + "_o2"; }

struct Optimized {
  Optimizer opt;
  rewriters::RunReport report;
  rewriters::PassContext ctx;
  bool declined(const std::string& text) const {
    for (const auto& d : ctx.declines())
      if (d.find("channels-last") != std::string::npos && d.find(text) != std::string::npos) return true;
    return false;
  }
};

// `assumedIsa`: the CPU level the run assumes (--assume-isa; "": this CPU's).
std::unique_ptr<Optimized> optimize(const std::string& fixture, const std::string& pipeline,
                                    const std::string& assumedIsa = "") {
  const auto& f = test::fixture(fixture);
  auto o = std::make_unique<Optimized>(Optimized{Optimizer::load(f.path), {}, {}});
  o->ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  o->ctx.assumedIsa = assumedIsa;
  o->report = o->opt.run(pipeline, &o->ctx);
  return o;
}

bool isConversionTo(const ir::Node* n, c10::MemoryFormat f) {
  return n->is("aten::contiguous") && n->numArgs() == 2 && n->arg(1).isLiteral() &&
         n->arg(1).literal().is<c10::MemoryFormat>() && n->arg(1).literal().as<c10::MemoryFormat>() == f;
}

std::vector<ir::Node*> conversions(const ir::Graph& g, c10::MemoryFormat f) {
  std::vector<ir::Node*> out;
  g.walk([&](ir::Node* n) {
    if (isConversionTo(n, f)) out.push_back(n);
  });
  return out;
}

int64_t counter(const Optimized& o, const std::string& name) { return test::counter(o.report, "channels-last", name); }

// Every 4-D/5-D tensor among the outputs has `format`.
void checkOutputFormat(const c10::IValue& out, c10::MemoryFormat format) {
  if (out.isTensor()) {
    const at::Tensor& t = out.toTensor();
    if (t.dim() == 4 || t.dim() == 5) {
      INFO("output shape " << t.sizes() << " strides " << t.strides());
      CHECK(t.is_contiguous(format));
    }
  } else if (out.isTuple()) {
    for (const auto& e : out.toTupleRef().elements()) checkOutputFormat(e, format);
  } else if (out.isList()) {
    for (const auto& e : out.toListRef()) checkOutputFormat(e, format);
  }
}

c10::IValue runOptimized(const Optimized& o, const std::string& fixture, uint64_t seed = 3) {
  torch::jit::Module m = o.opt.exportModule();
  return test::runForward(m, verify::makeInputs(test::fixture(fixture).inputs, seed));
}

}  // namespace

TEST_CASE("channels-last gives resnet18 one entry conversion and none inside residual blocks") {
  for (const char* name : {"resnet18_script", "resnet18_trace"}) {
    DYNAMIC_SECTION(name) {
      auto o = optimize(name, "-O2");
      const ir::Graph& g = o->opt.model().forward();
      CHECK(counter(*o, "convs") == 20);
      CHECK(counter(*o, "weights") == 17);  // the three 1x1 downsample weights are channels-last already
      auto entries = conversions(g, c10::MemoryFormat::ChannelsLast);
      REQUIRE(entries.size() == 1);
      CHECK(entries[0]->argValue(0)->node()->opcode() == ir::Opcode::Placeholder);
      for (const ir::Node* n : conversions(g, c10::MemoryFormat::Contiguous)) {
        INFO(n->scope());
        CHECK(n->scope().rfind("layer", 0) == std::string::npos);
      }
      CHECK(conversions(g, c10::MemoryFormat::Contiguous).size() == 1);  // before the flatten
      // Weights are stored channels-last.
      g.walk([&](ir::Node* n) {
        if (n->is("aten::conv2d")) CHECK(rewriters::constantTensor(n->argValue(1))->is_contiguous(at::MemoryFormat::ChannelsLast));
      });
      auto v = o->opt.verify(test::fixture(name).inputs, {1e-4, 1e-5}, 2);
      INFO(v.summary);
      CHECK(v.passed);
    }
  }
}

TEST_CASE("channels-last keeps a view, a flatten and a permute after a conv correct") {
  for (const char* name : {"view_after_conv", "flatten_after_conv", "permute_after_conv"}) {
    DYNAMIC_SECTION(name) {
      auto o = optimize(name, "-O2");
      const ir::Graph& g = o->opt.model().forward();
      CHECK(counter(*o, "convs") >= 2);
      // Breakers read contiguous values (through a permute of one, as in
      // y.permute(0, 2, 3, 1).reshape(...)).
      g.walk([&](ir::Node* n) {
        if (n->is("aten::view") || n->is("aten::flatten") || n->is("aten::reshape")) {
          const ir::Node* producer = n->argValue(0)->node();
          if (producer && (producer->is("aten::permute") || producer->is("aten::transpose")))
            producer = producer->argValue(0)->node();
          INFO(n->qualifiedTarget());
          CHECK((producer && isConversionTo(producer, c10::MemoryFormat::Contiguous)));
        }
      });
      auto v = o->opt.verify(test::fixture(name).inputs, {1e-4, 1e-5}, 2);
      INFO(v.summary);
      CHECK(v.passed);
      checkOutputFormat(runOptimized(*o, name), at::MemoryFormat::Contiguous);
    }
  }
}

TEST_CASE("channels-last leaves the NHWC detour of a ConvNeXt-style block as free views") {
  auto o = optimize("permute_after_conv", "-O1,channels-last{mode=on}");
  const ir::Graph& g = o->opt.model().forward();
  // permute(0,2,3,1) feeding layer_norm reads the channels-last value
  // directly; the one feeding reshape gets contiguous() first.
  size_t direct = 0, converted = 0;
  g.walk([&](ir::Node* n) {
    if (!n->is("aten::permute")) return;
    const ir::Node* producer = n->argValue(0)->node();
    if (producer && isConversionTo(producer, c10::MemoryFormat::Contiguous)) ++converted;
    else if (producer && producer->is("aten::conv2d")) ++direct;
  });
  CHECK(direct == 1);
  CHECK(converted == 1);
  auto v = o->opt.verify(test::fixture("permute_after_conv").inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

// GhostNet (timm): each ghost module slices a channel prefix off a cat. A
// slice of an NHWC tensor is an NHWC-strided view, so the region goes on
// through it: one conversion in, one out (the slices were breakers, with
// conversions around each: GhostNet's -O2 ran 1.38x slower than now).
TEST_CASE("channels-last keeps GhostNet's channel slices and their in-place residual in the region") {
  auto o = optimize("ghost_block_trace", "-O1,channels-last{mode=on}");
  const ir::Graph& g = o->opt.model().forward();
  CHECK(counter(*o, "convs") == 5);
  CHECK(conversions(g, c10::MemoryFormat::ChannelsLast).size() == 1);
  CHECK(conversions(g, c10::MemoryFormat::Contiguous).size() <= 1);  // before the flatten, if any
  size_t slices = 0;
  g.walk([&](ir::Node* n) {
    if (!n->is("aten::slice")) return;
    ++slices;
    CHECK_FALSE(isConversionTo(n->argValue(0)->node(), c10::MemoryFormat::Contiguous));
  });
  CHECK(slices > 0);
  auto v = o->opt.verify(test::fixture("ghost_block_trace").inputs, {1e-4, 1e-5}, 3);
  INFO(v.summary);
  CHECK(v.passed);
  checkOutputFormat(runOptimized(*o, "ghost_block_trace"), at::MemoryFormat::Contiguous);
}

TEST_CASE("channels-last with keep-output-layout=false returns channels-last outputs") {
  auto o = optimize("view_after_conv", "-O1,channels-last{mode=on,keep-output-layout=false}");
  auto out = runOptimized(*o, "view_after_conv");
  REQUIRE(out.isTuple());
  const at::Tensor y = out.toTupleRef().elements()[1].toTensor();
  CHECK(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK_FALSE(y.is_contiguous());
  auto v = o->opt.verify(test::fixture("view_after_conv").inputs, {1e-4, 1e-5}, 1);
  CHECK(v.passed);
}

TEST_CASE("ChannelsLastDoesNotFireOnConv1d") {
  auto o = optimize("conv1d_bn", "-O1,channels-last{mode=on}");
  const ir::Graph& g = o->opt.model().forward();
  CHECK(counter(*o, "convs") == 0);
  for (const auto& e : o->report.executions)
    if (e.pass == "channels-last") CHECK_FALSE(e.result.changed);
  CHECK(test::countOps(g, "aten::contiguous") == 0);
  CHECK(o->declined("1-D conv"));
}

TEST_CASE("channels-last mode=auto declines small models that mode=on converts") {
  for (const char* name : {"deep_stack_500", "grouped_convs", "inplace_ops"}) {
    DYNAMIC_SECTION(name) {
      auto autoRun = optimize(name, "-O2");
      CHECK(counter(*autoRun, "convs") == 0);
      CHECK(autoRun->declined("mode=auto"));
      auto on = optimize(name, "-O1,channels-last{mode=on}");
      CHECK(counter(*on, "convs") > 0);
      auto v = on->opt.verify(test::fixture(name).inputs, {1e-4, 1e-5}, 2);
      INFO(v.summary);
      CHECK(v.passed);
      checkOutputFormat(runOptimized(*on, name), at::MemoryFormat::Contiguous);
    }
  }
}

TEST_CASE("channels-last mode=off changes nothing") {
  auto o = optimize("resnet18_script", "-O1,channels-last{mode=off}");
  CHECK(test::countOps(o->opt.model().forward(), "aten::contiguous") == 0);
  CHECK(o->declined("mode=off"));
}

TEST_CASE("O2 keeps every fixture's numerics and output format, and mode=on does too") {
  std::filesystem::create_directories(o2Dir());
  for (const auto& f : test::allFixtures()) {
    DYNAMIC_SECTION(f.name) {
      for (const char* pipeline : {"-O2", "-O1,channels-last{mode=on}"}) {
        INFO(pipeline);
        auto o = optimize(f.name, pipeline);
        if (f.name == "train_mode_trace") {
          // Traced in training mode: compare with the same weights in eval semantics (as o1_test does).
          torch::jit::Module reference = torch::jit::load(test::fixture("train_mode_eval_reference").path);
          reference.eval();
          auto inputs = verify::makeInputs(f.inputs, 3);
          torch::jit::Module optimized = o->opt.exportModule();
          auto cmp = verify::compareOutputs(test::runForward(optimized, inputs), test::runForward(reference, inputs),
                                            verify::Tolerance{1e-4, 1e-5});
          INFO(cmp.summary());
          CHECK(cmp.withinTolerance());
        } else {
          auto v = o->opt.verify(f.inputs, {1e-4, 1e-5}, 2);
          INFO(v.summary);
          CHECK(v.passed);
        }
        checkOutputFormat(runOptimized(*o, f.name), at::MemoryFormat::Contiguous);
        if (std::string(pipeline) == "-O2") o->opt.save(o2Dir() + "/" + f.name + ".pt");
      }
    }
  }
}

namespace {

// Seeded, He-scaled weights: activations stay O(1), so the fp32 tolerance
// is not at the mercy of a near-zero output element.
test::ParsedGraph buildGraph(const std::string& text) {
  torch::manual_seed(7);
  return test::parseWithConstants(text, {{"c1.weight", torch::randn({32, 3, 3, 3}) * std::sqrt(2.0 / 27)},
                                         {"c2.weight", torch::randn({32, 32, 3, 3}) * std::sqrt(2.0 / 288)}});
}

void checkSameOutputs(const c10::IValue& a, const c10::IValue& b) {
  auto cmp = verify::compareOutputs(a, b, verify::Tolerance{1e-4, 1e-5});
  INFO(cmp.summary());
  CHECK(cmp.withinTolerance());
}

}  // namespace

TEST_CASE("channels-last converts a value written in place right after its definition") {
  // %v views %y, then relu_ writes %y: %v must see the write. A contiguous()
  // copy taken just before the view would not, so %y leaves the region at
  // its definition instead (pinned).
  auto b = buildGraph(
      "graph(%x : Tensor):\n"
      "  %w1 : Tensor = get_attr[\"c1.weight\"]\n"
      "  %w2 : Tensor = get_attr[\"c2.weight\"]\n"
      "  %y : Tensor = aten::conv2d(%x, %w1, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  %v : Tensor = aten::view(%y, [2, -1])\n"
      "  %r : Tensor = aten::relu_(%y)\n"
      "  %z : Tensor = aten::conv2d(%r, %w2, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  %t : Tuple[Tensor, Tensor] = prim::TupleConstruct(%v, %z)\n"
      "  output(%t)\n");
  auto x = torch::randn({2, 3, 8, 8});
  auto expected = test::runGraph(*b.graph, {x});
  rewriters::PassContext ctx;
  auto report = test::runPipeline(*b.graph, "channels-last{mode=on}", &ctx);
  INFO(b.graph->str());
  CHECK(test::counter(report, "channels-last", "pinned") == 1);
  const ir::Node* view = nullptr;
  b.graph->walk([&](ir::Node* n) {
    if (n->is("aten::view")) view = n;
  });
  REQUIRE(view);
  const ir::Node* producer = view->argValue(0)->node();
  CHECK(isConversionTo(producer, c10::MemoryFormat::Contiguous));
  CHECK(producer->argValue(0)->node()->is("aten::conv2d"));  // right after the conv
  checkSameOutputs(test::runGraph(*b.graph, {x}), expected);
}

TEST_CASE("channels-last keeps control-flow blocks intact with conversions at their boundary") {
  auto b = buildGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %w1 : Tensor = get_attr[\"c1.weight\"]\n"
      "  %w2 : Tensor = get_attr[\"c2.weight\"]\n"
      "  %y : Tensor = aten::conv2d(%x, %w1, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  %r : Tensor = aten::relu(%y)\n"
      "  %z : Tensor = aten::conv2d(%r, %w2, None, [1, 1], [1, 1], [1, 1], 1)\n"
      "  %o : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %a : Tensor = aten::view(%z, [2, -1])\n"
      "      output(%a)\n"
      "    block1():\n"
      "      %f : Tensor = aten::flatten.using_ints(%r, 1, -1)\n"
      "      output(%f)\n"
      "  output(%o)\n");
  auto x = torch::randn({2, 3, 8, 8});
  auto expectedTrue = test::runGraph(*b.graph, {x, true});
  auto expectedFalse = test::runGraph(*b.graph, {x, false});
  const std::string blocksBefore = [&] {
    std::string s;
    b.graph->walk([&](ir::Node* n) {
      if (n->owningBlock() != b.graph->block()) s += n->qualifiedTarget() + ";";
    });
    return s;
  }();
  auto report = test::runPipeline(*b.graph, "channels-last{mode=on}");
  CHECK(test::counter(report, "channels-last", "convs") == 2);
  CHECK(test::counter(report, "channels-last", "exits") == 2);  // %z and %r, before the prim::If
  std::string blocksAfter;
  b.graph->walk([&](ir::Node* n) {
    if (n->owningBlock() != b.graph->block()) blocksAfter += n->qualifiedTarget() + ";";
  });
  CHECK(blocksAfter == blocksBefore);
  checkSameOutputs(test::runGraph(*b.graph, {x, true}), expectedTrue);
  checkSameOutputs(test::runGraph(*b.graph, {x, false}), expectedFalse);
}

TEST_CASE("channels-last reads the groups of _convolution at its own position") {
  // groups is argument 8 of aten::_convolution (argument 6 is `transposed`).
  // Two 4-group convs with 8 channels per group carry all the conv work:
  // mode=auto declines the region for it; mode=on converts both convs and
  // keeps the numerics.
  auto make = [] {
    torch::manual_seed(7);
    const std::string conv = "aten::_convolution(%in, %w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 4, False, "
                             "False, True, True)\n";
    auto with = [&](const std::string& in, const std::string& w) {
      std::string c = conv;
      c.replace(c.find("%in"), 3, in);
      c.replace(c.find("%w"), 2, w);
      return c;
    };
    return test::parseWithConstants("graph(%x : Tensor):\n"
                                    "  %w1 : Tensor = get_attr[\"g1.weight\"]\n"
                                    "  %w2 : Tensor = get_attr[\"g2.weight\"]\n"
                                    "  %y : Tensor = " + with("%x", "%w1") +
                                    "  %r : Tensor = aten::relu(%y)\n"
                                    "  %z : Tensor = " + with("%r", "%w2") +
                                    "  output(%z)\n",
                                    {{"g1.weight", torch::randn({32, 8, 3, 3}) * std::sqrt(2.0 / 72)},
                                     {"g2.weight", torch::randn({32, 8, 3, 3}) * std::sqrt(2.0 / 72)}});
  };
  const at::Tensor x = torch::randn({2, 32, 8, 8});

  auto declined = make();
  rewriters::PassContext autoCtx;
  auto autoReport = test::runPipeline(*declined.graph, "channels-last{mode=auto}", &autoCtx);
  CHECK(test::counter(autoReport, "channels-last", "convs") == 0);
  bool grouped = false;
  for (const auto& d : autoCtx.declines()) grouped |= d.find("grouped convs with several channels per group") != std::string::npos;
  CHECK(grouped);
  CHECK(test::countOps(*declined.graph, "aten::contiguous") == 0);

  auto on = make();
  const auto expected = test::runGraph(*on.graph, {x});
  auto onReport = test::runPipeline(*on.graph, "channels-last{mode=on}");
  INFO(on.graph->str());
  CHECK(test::counter(onReport, "channels-last", "convs") == 2);
  CHECK(test::counter(onReport, "channels-last", "weights") == 2);
  on.graph->walk([&](ir::Node* n) {
    if (n->is("aten::_convolution"))
      CHECK(rewriters::constantTensor(n->argValue(1))->is_contiguous(at::MemoryFormat::ChannelsLast));
  });
  checkSameOutputs(test::runGraph(*on.graph, {x}), expected);
}

TEST_CASE("channels-last logs every edit it makes on every fixture (the edit log self-check)") {
  // After -O1, channels-last as -O2 runs it (mode=auto), and mode=on with and
  // without keep-output-layout: Instrumentation::checkEditLog rebuilds the
  // IR text before the pass from the log's diff and compares it with the
  // real text, and checks that the pass reports changed exactly when it
  // logged edits.
  const auto& registry = defaultRegistry();
  rewriters::Instrumentation inst;
  inst.checkEditLog = true;
  size_t fired = 0, edits = 0;
  for (const auto& f : test::allFixtures()) {
    INFO(f.name);
    Optimizer opt = Optimizer::load(f.path);
    rewriters::PassContext prep;
    prep.exampleInputs = verify::makeInputs(f.inputs, 0);
    opt.run(rewriters::presetPipelineBody(1), &prep);
    for (const char* pass :
         {"channels-last{mode=auto}", "channels-last{mode=on}", "channels-last{mode=on,keep-output-layout=false}"}) {
      INFO(pass);
      ir::Model model = opt.model().clone();
      rewriters::PassContext ctx;
      rewriters::PassManager pm(registry, rewriters::parsePipeline(pass, registry), inst);
      rewriters::RunReport report;
      CHECK_NOTHROW(report = pm.run(model, ctx));
      for (const auto& e : report.executions) {
        CHECK(e.changed == (e.edits != 0));
        fired += e.changed;
        edits += e.edits;
      }
    }
  }
  INFO("executions that changed a graph: " << fired << ", edits: " << edits);
  CHECK(fired >= 40);  // 45 with LibTorch 1.13 on CPU
}

TEST_CASE("channels-last asks the target which conv kinds run in channels-last: the CPU probe, never for CUDA") {
  // A transposed conv: LibTorch 1.13 computes it contiguous on a CPU.
  const bool cpuRuns = target::convRunsChannelsLast("cpu", /*transposed=*/true, 4);
  auto cpu = optimize("conv_transpose2d_bn", "-O1,channels-last{mode=on}");
  if (!cpuRuns) {
    CHECK(counter(*cpu, "convs") == 0);
    CHECK(cpu->declined("contiguous format only on a CPU (probed)"));
  } else {
    CHECK(counter(*cpu, "convs") == 1);
  }
  // A CUDA target gets cuDNN's answer (every kind), not the CPU's; the
  // verification stand-in and the numerics are the CPU's business elsewhere.
  const auto& f = test::fixture("conv_transpose2d_bn");
  Optimized cuda{Optimizer::load(f.path), {}, {}};
  cuda.ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  cuda.opt.run("-O1", &cuda.ctx);  // the folds (no cuDNN fusions: a CPU target so far)
  cuda.ctx.targetDevice = "cuda";
  cuda.report = cuda.opt.run("channels-last{mode=on}", &cuda.ctx);
  CHECK(counter(cuda, "convs") == 1);
  CHECK_FALSE(cuda.declined("contiguous format only"));
  // The model still computes the same on the CPU.
  auto v = cuda.opt.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("channels-last decides the same under --assume-isa avx2 and avx512_bf16 (the ISA does not pick conv kinds)") {
  std::vector<std::map<std::string, int64_t>> counters;
  for (const char* isa : {"avx2", "avx512_bf16"}) {
    auto o = optimize("resnet18_script", "-O2", isa);
    std::map<std::string, int64_t> c;
    for (const char* name : {"convs", "weights", "entries", "exits", "regions"}) c[name] = counter(*o, name);
    counters.push_back(c);
    auto t = optimize("conv_transpose2d_bn", "-O1,channels-last{mode=on}", isa);
    CHECK(counter(*t, "convs") == (target::convRunsChannelsLast("cpu", true, 4) ? 1 : 0));
  }
  CHECK(counters[0] == counters[1]);
  CHECK(counters[0]["convs"] == 20);
}

namespace {

// two_conv_regions after -O1: two regions of two convs each, separated by a
// flatten and a view back to 4-D.
struct TwoRegions {
  Optimizer opt;
  rewriters::PassContext ctx;
  std::vector<layout::ChannelsLastRegion> regions;
  std::vector<std::string> ids;
  std::vector<std::set<std::string>> convNames;  // per region
};

std::unique_ptr<TwoRegions> twoRegions() {
  const auto& f = test::fixture("two_conv_regions");
  auto t = std::make_unique<TwoRegions>(TwoRegions{Optimizer::load(f.path), {}, {}, {}, {}});
  t->ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  t->opt.run("-O1", &t->ctx);
  t->regions = layout::channelsLastRegions(t->opt.model().forward(), t->ctx);
  for (const auto& r : t->regions) {
    t->ids.push_back(r.id);
    std::set<std::string> names;
    for (const ir::Node* c : r.convs) names.insert(c->output()->name());
    t->convNames.push_back(names);
  }
  return t;
}

// The conv computes in channels-last: its result's metadata says so (the
// pass sets it; shape-prop recorded the rest), and its weight is stored
// channels-last (a 1x1 weight is both formats at once).
bool computesChannelsLast(ir::Node* conv) {
  const auto w = rewriters::constantTensor(conv->argValue(1));
  return conv->output()->meta().memoryFormat == c10::MemoryFormat::ChannelsLast && w &&
         w->is_contiguous(at::MemoryFormat::ChannelsLast);
}

}  // namespace

TEST_CASE("channels-last finds the regions of a model, named by their first conv, the same on every run") {
  auto t = twoRegions();
  REQUIRE(t->regions.size() == 2);
  for (const auto& r : t->regions) {
    CHECK(r.convs.size() == 2);
    CHECK(r.autoDecline.empty());  // mode=auto would convert both
    CHECK(r.id == r.convs.front()->output()->name());
    CHECK(r.nodes.size() > r.convs.size());  // relu, add
  }
  CHECK(t->ids[0] != t->ids[1]);
  // Another load, the same names; looking changes nothing.
  const std::string before = t->opt.model().forward().str();
  auto again = twoRegions();
  CHECK(again->ids == t->ids);
  CHECK(t->opt.model().forward().str() == before);
  // resnet18: one region (the flatten before fc is its only exit).
  const auto& f = test::fixture("resnet18_script");
  Optimizer r18 = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  r18.run("-O1", &ctx);
  const auto found = layout::channelsLastRegions(r18.model().forward(), ctx);
  REQUIRE(found.size() == 1);
  CHECK(found[0].convs.size() == 20);
}

TEST_CASE("channels-last regions= converts the named region only") {
  for (size_t k = 0; k < 2; ++k) {
    DYNAMIC_SECTION("region " << k) {
      auto t = twoRegions();
      REQUIRE(t->ids.size() == 2);
      std::ostringstream explain;
      t->ctx.explain = &explain;
      // '%' as --explain prints it, and blanks, are accepted.
      const std::string pipeline = "channels-last{mode=on,regions=\" %" + t->ids[k] + " ;\"}";
      auto report = t->opt.run(pipeline, &t->ctx, test::checkedInstrumentation());
      Optimized o{std::move(t->opt), report, {}};
      CHECK(report.changed());
      CHECK(test::loggedEdits(report) > 0);
      CHECK(counter(o, "regions") == 1);
      CHECK(counter(o, "convs") == 2);
      CHECK(counter(o, "unselected-regions") == 1);
      CHECK(counter(o, "declined-regions") == 0);
      const ir::Graph& g = o.opt.model().forward();
      size_t convs = 0;
      g.walk([&](ir::Node* n) {
        if (!n->is("aten::conv2d")) return;
        ++convs;
        INFO(n->output()->name());
        CHECK(computesChannelsLast(n) == (t->convNames[k].count(n->output()->name()) > 0));
      });
      CHECK(convs == 4);
      // One entry and one exit conversion around the selected region only.
      CHECK(conversions(g, c10::MemoryFormat::ChannelsLast).size() == 1);
      CHECK(conversions(g, c10::MemoryFormat::Contiguous).size() == 1);
      CHECK_THAT(explain.str(), Catch::Contains("converting region %" + t->ids[k] + " (2 convs"));
      // Named by the first conv's module too: the ids are IR value names.
      const std::string otherModule = k == 0 ? "b1" : "a1";
      CHECK_THAT(explain.str(), Catch::Contains("region %" + t->ids[1 - k] + " (2 convs, from " + otherModule +
                                                ") not named in regions="));
      auto v = o.opt.verify(test::fixture("two_conv_regions").inputs, {1e-4, 1e-5}, 2);
      INFO(v.summary);
      CHECK(v.passed);
      checkOutputFormat(runOptimized(o, "two_conv_regions"), at::MemoryFormat::Contiguous);
    }
  }
}

TEST_CASE("channels-last regions= naming both regions converts both, as mode=on does") {
  auto t = twoRegions();
  REQUIRE(t->ids.size() == 2);
  ir::Model all = t->opt.model().clone();
  auto report = t->opt.run("channels-last{mode=auto,regions=" + t->ids[0] + ";" + t->ids[1] + "}", &t->ctx,
                           test::checkedInstrumentation());
  CHECK(test::counter(report, "channels-last", "regions") == 2);
  CHECK(test::counter(report, "channels-last", "convs") == 4);
  rewriters::PassContext ctx;
  test::runChecked(all, "channels-last{mode=on}", &ctx);
  CHECK(all.forward().str() == t->opt.model().forward().str());
  // Canonical pipeline text keeps the list unquoted and reads back the same.
  const std::string text = "channels-last{mode=on,regions=" + t->ids[0] + ";" + t->ids[1] + "}";
  const auto p = rewriters::parsePipeline(text, defaultRegistry());
  CHECK(rewriters::printPipeline(p) == text);
}

TEST_CASE("ChannelsLastDoesNotFireWhenRegionsNamesNoRegion") {
  auto t = twoRegions();
  const std::string before = t->opt.model().forward().str();
  auto report = t->opt.run("channels-last{mode=on,regions=nosuch.1}", &t->ctx, test::checkedInstrumentation());
  CHECK_FALSE(report.changed());
  CHECK(test::loggedEdits(report) == 0);
  CHECK(test::counter(report, "channels-last", "convs") == 0);
  CHECK(test::counter(report, "channels-last", "unselected-regions") == 2);
  CHECK(t->opt.model().forward().str() == before);
  bool named = false;
  for (const auto& d : t->ctx.declines()) named |= d.find("regions= names %nosuch.1, which is not") != std::string::npos;
  CHECK(named);
}
