// DOT drawings (draw/) and their rendering (session/render.h): the text
// reads back with GraphViz's cgraph (agmemread) when the build has it, node
// and edge counts match the IR, labels carry the op, key literals, constants
// and metadata, clusters follow module scopes, and a diff shows a conv+bn
// fold in its colours with provenance. A pass's changes are drawn from its
// edit log (writeDotChanges) without matching.
#include "draw/legend.h"
#include "draw/matcher.h"
#include "draw/writer.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "rewriters/registry.h"
#include "tests/support/pass_test.h"
#include "session/render.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <regex>

#ifdef PTOPT_WITH_GRAPHVIZ
#include <graphviz/cgraph.h>
#endif

using namespace ptopt;

namespace {

struct Counts {
  size_t irNodes = 0;  // DOT nodes standing for IR nodes (n*), block params (p*), removed (r*), summaries (s*)
  size_t params = 0, removed = 0, summaries = 0, other = 0;
  size_t edges = 0, invisibleEdges = 0;
  size_t nodes() const { return irNodes + params + removed + summaries + other; }
};

// Counts by reading the text: node statements start a line with their id.
Counts countText(const std::string& dot) {
  Counts c;
  std::istringstream in(dot);
  std::string line;
  const std::regex nodeStmt(R"(^\s*([nprs])(\d+) \[)");
  const std::regex edgeStmt(R"(^\s*\w+ -> \w+)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, nodeStmt)) {
      const char kind = m[1].str()[0];
      if (kind == 'n') ++c.irNodes;
      else if (kind == 'p') ++c.params;
      else if (kind == 'r') ++c.removed;
      else ++c.summaries;
    } else if (line.rfind("  more [", 0) == 0) {
      ++c.other;
    } else if (std::regex_search(line, edgeStmt)) {
      if (line.find("style=invis") != std::string::npos) ++c.invisibleEdges;
      else ++c.edges;
    }
  }
  return c;
}

// Constants and lists of literals: drawn in their users' labels by default.
bool foldedIntoUsers(const ir::Node* n) {
  if (n->opcode() == ir::Opcode::GetAttr) return true;
  if (!n->is("prim::ListConstruct")) return false;
  for (const auto& a : n->args())
    if (!a.isLiteral()) return false;
  return true;
}

// What the header contract promises, computed from the IR.
Counts expectedCounts(const ir::Graph& g, bool showConstants) {
  Counts c;
  g.walk([&](ir::Node* n) {
    const bool hidden = !showConstants && foldedIntoUsers(n);
    if (!hidden) ++c.irNodes;
    for (const auto& b : n->blocks()) {
      c.params += b->params().size();
      ++c.edges;  // the block's yield -> owner
    }
    if (hidden) return;
    for (const auto& a : n->args())
      if (a.isValue() && (showConstants || !a.value()->node() || !foldedIntoUsers(a.value()->node()))) ++c.edges;
  });
  return c;
}

// Reads the text back with GraphViz and returns (nodes, edges); (-1, -1)
// without GraphViz in the build.
std::pair<long, long> readBack(const std::string& dot) {
#ifdef PTOPT_WITH_GRAPHVIZ
  Agraph_t* g = agmemread(dot.c_str());
  REQUIRE(g != nullptr);
  const long nodes = agnnodes(g), edges = agnedges(g);
  agclose(g);
  return {nodes, edges};
#else
  (void)dot;
  return {-1, -1};
#endif
}

void checkCounts(const ir::Graph& g, const std::string& dot, bool showConstants) {
  const Counts expected = expectedCounts(g, showConstants);
  const Counts got = countText(dot);
  CHECK(got.irNodes == expected.irNodes);
  CHECK(got.params == expected.params);
  CHECK(got.edges == expected.edges);
  const auto [nodes, edges] = readBack(dot);
  if (nodes >= 0) {
    CHECK(static_cast<size_t>(nodes) == expected.irNodes + expected.params);
    CHECK(static_cast<size_t>(edges) == expected.edges + got.invisibleEdges);
  }
}

ir::Model importWithShapes(const test::Fixture& f) {
  ir::Model m = test::importFixture(f);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  test::runPipeline(m.forward(), "shape-prop", &ctx);
  return m;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("DOT of real models reads back, with one node per IR node and one edge per use") {
  for (const char* name : {"resnet18_script", "resnet18_trace", "mobilenet_v2_script", "control_flow",
                           "inplace_ops", "embedding_int64", "grouped_convs"}) {
    DYNAMIC_SECTION(name) {
      ir::Model m = test::importFixture(test::fixture(name));
      const ir::Graph& g = m.forward();
      draw::DotOptions o;
      o.maxNodes = 0;
      checkCounts(g, draw::writeDot(g, o), false);
      o.showConstants = true;
      checkCounts(g, draw::writeDot(g, o), true);
    }
  }
}

TEST_CASE("Labels show the op, key literals, folded constants, dtype/shape and a channels-last badge") {
  ir::Model m = importWithShapes(test::fixture("resnet18_script"));
  ir::Graph& g = m.forward();
  const std::string dot = draw::writeDot(g);
  // The stem conv: 7×7, stride 2, padding 3; its weight folded in with its shape.
  CHECK(dot.find("<B>conv2d</B>") != std::string::npos);
  CHECK(dot.find("7×7 s2 p3") != std::string::npos);
  CHECK(dot.find("64×3×7×7") != std::string::npos);
  CHECK(dot.find("weight") != std::string::npos);
  // A BatchNorm's four tensors, grouped by shape.
  CHECK(dot.find("weight, bias, running_mean, running_var <I>64</I>") != std::string::npos);
  // Shape propagation ran: dtype and shape of the stem's output (64x64 input).
  CHECK(dot.find("f32 1×64×32×32") != std::string::npos);
  // Clusters by module scope, and the legend.
  CHECK(dot.find("<B>layer1.0</B>") != std::string::npos);
  CHECK(dot.find("<B>layer4</B>") != std::string::npos);
  CHECK(dot.find("parameters") != std::string::npos);
  CHECK(dot.find("conv2d 20") != std::string::npos);
  // Values with more than one user say so (the residual inputs).
  CHECK(dot.find("2 users") != std::string::npos);
  CHECK(dot.find("<B>[CL]</B>") == std::string::npos);

  // Channels-last metadata gets the badge.
  g.walk([&](ir::Node* n) {
    if (n->is("aten::conv2d")) n->output()->meta().memoryFormat = c10::MemoryFormat::ChannelsLast;
  });
  const std::string cl = draw::writeDot(g);
  CHECK(occurrences(cl, "<B>[CL]</B>") == 20);

  // Colour by dtype: the legend lists the dtypes it saw.
  draw::DotOptions byDtype;
  byDtype.colorBy = draw::DotColorBy::Dtype;
  const std::string dtypeDot = draw::writeDot(g, byDtype);
  CHECK(dtypeDot.find(">f32</FONT>") != std::string::npos);
}

TEST_CASE("Graph stats count ops, casts, layout conversions and parameter bytes") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::to.dtype(%x, torch.bfloat16, False, False, None)\n"
      "  %b : Tensor = aten::contiguous(%a, torch.channels_last)\n"
      "  %c : Tensor = aten::to.dtype(%b, torch.float32, False, False, None)\n"
      "  %d : Tensor = aten::relu(%c)\n"
      "  output(%d)\n");
  const draw::GraphStats s = draw::graphStats(*g);
  CHECK(s.casts == 2);
  CHECK(s.layoutConversions == 1);
  CHECK(s.opCounts.at("to") == 2);
  CHECK(s.opCounts.at("relu") == 1);
  CHECK(s.parameterBytes == 0);

  ir::Model m = test::importFixture(test::fixture("resnet18_script"));
  // resnet18 has 11.69 M float parameters (plus BatchNorm buffers).
  const size_t bytes = draw::graphStats(m.forward()).parameterBytes;
  CHECK(bytes > 11'600'000 * 4);
  CHECK(bytes < 11'800'000 * 4);
  CHECK(draw::writeDot(*g).find("2 casts · 1 layout conversions") != std::string::npos);
}

TEST_CASE("Option --depth collapses deeper scopes into one box each, with merged edges") {
  ir::Model m = test::importFixture(test::fixture("resnet18_script"));
  draw::DotOptions o;
  o.depth = 1;
  const std::string dot = draw::writeDot(m.forward(), o);
  const Counts c = countText(dot);
  CHECK(c.summaries == 4);  // layer1 .. layer4
  CHECK(dot.find("<B>layer3</B> <FONT COLOR=\"#555555\">(") != std::string::npos);
  CHECK(dot.find("conv2d ×") != std::string::npos);
  // Stem conv, bn, relu, maxpool, avgpool, flatten, fc, input, output stay
  // nodes, and bn1's input-rank check (size, len, gt, If, RaiseException,
  // two block yields).
  CHECK(c.irNodes == 16);
  const auto [nodes, edges] = readBack(dot);
  if (nodes >= 0) CHECK(static_cast<size_t>(nodes) == c.nodes());
  (void)edges;
}

TEST_CASE("Option --max-nodes keeps huge graphs drawable") {
  ir::Model m = test::importFixture(test::fixture("deep_stack_500"));
  draw::DotOptions o;
  o.maxNodes = 200;
  const std::string dot = draw::writeDot(m.forward(), o);
  const Counts c = countText(dot);
  CHECK(c.nodes() <= 201);
  CHECK(dot.find("--max-nodes") != std::string::npos);
  readBack(dot);
  // Plenty of room: nothing is collapsed.
  o.maxNodes = 0;
  const Counts all = countText(draw::writeDot(m.forward(), o));
  CHECK(all.summaries == 0);
  CHECK(all.irNodes == expectedCounts(m.forward(), false).irNodes);
}

TEST_CASE("Control flow: blocks are boxes, their results join the If/Loop") {
  ir::Model m = test::importFixture(test::fixture("control_flow"));
  const std::string dot = draw::writeDot(m.forward());
  CHECK(dot.find("If: then") != std::string::npos);
  CHECK(dot.find("If: else") != std::string::npos);
  CHECK(dot.find("Loop body") != std::string::npos);
  CHECK(dot.find("label=\"body\"") != std::string::npos);
  CHECK(dot.find("<B>yield</B>") != std::string::npos);
}

TEST_CASE("Node matching pairs a graph with its folded self, the diff shows the fold") {
  ir::Model before = test::importFixture(test::fixture("resnet18_script"));
  ir::Model after = before.clone();
  test::runPipeline(after.forward(), "fold-conv-bn");

  // Provenance survives cloneGraph.
  auto copy = ir::cloneGraph(after.forward());
  size_t withProvenance = 0;
  copy->walk([&](ir::Node* n) { withProvenance += !n->provenance().empty(); });
  CHECK(withProvenance == 20);

  const draw::NodeMatching m = draw::matchNodes(before.forward(), after.forward());
  // Every conv of the result is matched to a conv (the one it was).
  after.forward().walk([&](ir::Node* n) {
    if (!n->is("aten::conv2d")) return;
    const ir::Node* b = m.before(n);
    REQUIRE(b != nullptr);
    CHECK(b->is("aten::conv2d"));
    CHECK(b->scope() == n->scope());
  });

  draw::DiffCounts counts;
  const std::string dot = draw::writeDotDiff(before.forward(), after.forward(), {}, &counts);
  CHECK(counts.removed == 20);  // the BatchNorms
  CHECK(counts.changed == 20);  // the convs, now with folded weights
  CHECK(counts.added == 0);
  CHECK(dot.find("conv1 ← fold(conv1, bn1)") != std::string::npos);
  CHECK(dot.find("layer1.0.conv1 ← fold(layer1.0.conv1, layer1.0.bn1)") != std::string::npos);
  CHECK(occurrences(dot, "fillcolor=\"#fff0a0\"") >= 20);  // changed: yellow
  CHECK(occurrences(dot, "style=\"rounded,dashed\" fillcolor") == 20);  // removed nodes: dashed
  CHECK(dot.find("weight = conv1.weight.bnfold") != std::string::npos);
  // Legend: op counts before/after.
  CHECK(dot.find("<B>before</B>") != std::string::npos);
  CHECK(dot.find(">batch_norm</TD><TD ALIGN=\"RIGHT\">20</TD><TD ALIGN=\"RIGHT\"><B>0</B>") != std::string::npos);
  const Counts c = countText(dot);
  CHECK(c.removed == 20);
  readBack(dot);

  SECTION("-O1 also fuses add+relu: the fused nodes are added, with provenance") {
    ir::Model o1 = before.clone();
    test::runPipeline(o1.forward(), "-O1");
    draw::DiffCounts c1;
    const std::string d1 = draw::writeDotDiff(before.forward(), o1.forward(), {}, &c1);
    const size_t fused = test::countOps(o1.forward(), "aten::_add_relu") + test::countOps(o1.forward(), "aten::_add_relu_");
    CHECK(fused == 8);
    CHECK(c1.added == fused);
    CHECK(c1.removed == 20 + 2 * fused);
    // The 20 convs; the pools whose int lists canonicalize writes short
    // ([3, 3] -> [3], a ListConstruct -> a literal) mean the same: unchanged.
    CHECK(c1.changed == 20);
    CHECK(d1.find("fuse(add") != std::string::npos);
    CHECK(occurrences(d1, "fillcolor=\"#c8efc8\"") >= fused);  // added: green
  }
}

TEST_CASE("The diff of two saved files matches nodes without shared names or scopes") {
  Optimizer opt = Optimizer::load(test::fixture("resnet18_script").path);
  opt.run("fold-conv-bn");
  const auto dir = std::filesystem::temp_directory_path() / "ptopt_dot_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "resnet18_folded.pt").string();
  opt.save(path);
  ir::Model a = test::importFixture(test::fixture("resnet18_script"));
  ir::Model b = ir::importModule(ir::loadTorchScript(path));
  const draw::NodeMatching m = draw::matchNodes(a.forward(), b.forward());
  size_t convsMatched = 0;
  b.forward().walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") && m.before(n) && m.before(n)->is("aten::conv2d")) ++convsMatched;
  });
  CHECK(convsMatched == 20);
  draw::DiffCounts counts;
  draw::writeDotDiff(a.forward(), b.forward(), {}, &counts);
  CHECK(counts.removed == 20);
  CHECK(counts.added == 0);
  CHECK(counts.changed == 20);
}

TEST_CASE("A graph diffed with itself has no changes") {
  for (const char* name : {"mobilenet_v2_script", "control_flow", "inplace_ops"}) {
    DYNAMIC_SECTION(name) {
      ir::Model a = test::importFixture(test::fixture(name));
      ir::Model b = a.clone();
      draw::DiffCounts counts;
      const std::string dot = draw::writeDotDiff(a.forward(), b.forward(), {}, &counts);
      CHECK(counts.added == 0);
      CHECK(counts.changed == 0);
      CHECK(counts.removed == 0);
      CHECK(dot.find("color=\"#2e8b3a\" penwidth=1.6") == std::string::npos);  // no added edges
    }
  }
}

TEST_CASE("Rendering: resnet18 to SVG in-process, or a clear error without GraphViz") {
  ir::Model m = test::importFixture(test::fixture("resnet18_script"));
  const std::string dot = draw::writeDot(m.forward());
  if (!session::graphvizAvailable()) {
    CHECK_THROWS_WITH(session::renderDot(dot, "svg"), Catch::Contains("built without GraphViz"));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string svg = session::renderDot(dot, "svg");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN("resnet18 rendered to SVG in " << seconds << " s (" << svg.size() << " bytes)");
  CHECK(seconds < 60);  // a sanity bound only; the goal is a few seconds
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("conv2d") != std::string::npos);
  const std::string png = session::renderDot(dot, "png");
  CHECK(png.substr(1, 3) == "PNG");
  CHECK_THROWS(session::renderDot(dot, "no-such-format"));
  // A diff renders without GraphViz rejecting any label (renderDot throws
  // when it does: an empty <B></B> once cost the diff its legend).
  ir::Model after = m.clone();
  test::runPipeline(after.forward(), "-O1");
  const std::string diffSvg = session::renderDot(draw::writeDotDiff(m.forward(), after.forward()), "svg");
  CHECK(diffSvg.find("before") != std::string::npos);
}

namespace {

// A tiny pass that edits through ir::Rewriter, so that its edit log is
// complete: every conv's stride becomes 2 (changed), every aten::relu becomes
// aten::hardtanh(x, 0, 6) (added; the relu's users now read it, the relu is
// erased).
class ReluToHardtanhPass : public rewriters::Pass {
 public:
  std::string name() const override { return "test-relu-to-hardtanh"; }
  std::string description() const override { return "relu -> hardtanh(0, 6), conv stride 2 (a test pass)"; }
  std::string contract() const override { return description(); }
  rewriters::PassResult run(ir::Graph& g, rewriters::PassContext& ctx) override {
    ir::Rewriter rw(g, ctx.edits, name());
    std::vector<ir::Node*> relus, convs;
    g.walk([&](ir::Node* n) {
      if (n->is("aten::relu")) relus.push_back(n);
      if (ir::ConvOp::match(n)) convs.push_back(n);
    });
    for (ir::Node* conv : convs) rw.setArg(conv, ir::ConvOp::match(conv)->index("stride"), std::vector<int64_t>{2, 2});
    for (ir::Node* relu : relus) {
      ir::Value* y = rw.call(relu, "aten::hardtanh", {ir::OpView::of(relu).value("self"), 0.0, 6.0});
      rw.replace(relu, y);
    }
    rewriters::PassResult r;
    r.changed = rw.changed();
    return r;
  }
};

const char* kSmallGraph =
    "graph(%x : Tensor):\n"
    "  %w : Tensor = get_attr[\"conv.weight\"]\n"
    "  %c : Tensor = aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], 1)\n"
    "  %a : Tensor = aten::relu(%c)\n"
    "  %b : Tensor = aten::sigmoid(%a)\n"
    "  %d : Tensor = aten::mul(%b, %a)\n"
    "  output(%d)\n";

test::ParsedGraph smallGraph() { return test::parseWithConstants(kSmallGraph, {{"conv.weight", torch::randn({4, 3, 3, 3})}}); }

// The DOT id of the node whose label starts with <B>op</B>.
std::string idOf(const std::string& dot, const std::string& op) {
  std::smatch m;
  const std::regex re("\\n\\s*(\\w+) \\[[^\\n]*label=<<TABLE[^>]*><TR><TD><B>" + op + "</B>");
  REQUIRE(std::regex_search(dot, m, re));
  return m[1].str();
}

bool hasEdge(const std::string& dot, const std::string& from, const std::string& to, const std::string& attrs) {
  return dot.find("  " + from + " -> " + to + (attrs.empty() ? ";" : " [" + attrs + "];")) != std::string::npos;
}

}  // namespace

TEST_CASE("A pass's changes are drawn from its edit log: added green, changed yellow, removed dashed") {
  test::ParsedGraph p = smallGraph();
  rewriters::PassRegistry registry;
  registry.add([] { return std::make_unique<ReluToHardtanhPass>(); });
  rewriters::Instrumentation inst;
  inst.wantChanges = true;
  inst.checkEditLog = true;  // the log describes the whole change
  std::string dot;
  draw::DiffCounts counts;
  size_t drawings = 0;
  inst.onPassEnd = [&](const rewriters::PassExecution& e, const ir::Graph& g) {
    REQUIRE(e.changes != nullptr);
    dot = draw::writeDotChanges(g, *e.changes, {}, &counts);
    ++drawings;
  };
  rewriters::PassManager pm(registry, rewriters::parsePipeline("test-relu-to-hardtanh", registry), inst);
  rewriters::PassContext ctx;
  const rewriters::RunReport report = pm.run(*p.graph, ctx);
  REQUIRE(report.changed());
  REQUIRE(drawings == 1);
  REQUIRE(test::countOps(*p.graph, "aten::relu") == 0);

  CHECK(counts.added == 1);    // hardtanh
  CHECK(counts.removed == 1);  // relu
  CHECK(counts.changed == 3);  // conv (stride), sigmoid and mul (read the hardtanh)
  // Colours and what changed.
  CHECK(occurrences(dot, "fillcolor=\"#c8efc8\"") == 1);  // added: green
  CHECK(occurrences(dot, "fillcolor=\"#fff0a0\"") == 3);  // changed: yellow
  CHECK(occurrences(dot, "style=\"rounded,dashed\" fillcolor") == 1);  // removed: dashed
  CHECK(dot.find("stride [1] → [2]") != std::string::npos);
  CHECK(dot.find("3×3 s2") != std::string::npos);  // the conv's label now
  CHECK(dot.find("inputs changed") != std::string::npos);
  // The removed relu keeps its old label; it reads the conv's value (still
  // there) and fed the sigmoid and the mul: dashed grey edges.
  const std::string conv = idOf(dot, "conv2d"), relu = idOf(dot, "relu"), hardtanh = idOf(dot, "hardtanh"),
                    sigmoid = idOf(dot, "sigmoid"), mul = idOf(dot, "mul"), input = idOf(dot, "input");
  CHECK(relu[0] == 'r');
  const std::string gone = "style=dashed color=\"#9a9a9a\"", made = "color=\"#2e8b3a\" penwidth=1.6";
  CHECK(hasEdge(dot, conv, relu, gone));
  CHECK(hasEdge(dot, relu, sigmoid, gone));
  CHECK(hasEdge(dot, relu, mul, gone));
  // New edges green; edges the pass did not touch plain.
  CHECK(hasEdge(dot, conv, hardtanh, made));
  CHECK(hasEdge(dot, hardtanh, sigmoid, made));
  CHECK(hasEdge(dot, hardtanh, mul, made));
  CHECK(hasEdge(dot, sigmoid, mul, ""));
  CHECK(hasEdge(dot, input, conv, ""));
  // Legend: op counts before (the log undone) and after.
  CHECK(dot.find(">relu</TD><TD ALIGN=\"RIGHT\">1</TD><TD ALIGN=\"RIGHT\"><B>0</B>") != std::string::npos);
  CHECK(dot.find(">hardtanh</TD><TD ALIGN=\"RIGHT\">0</TD><TD ALIGN=\"RIGHT\"><B>1</B>") != std::string::npos);
  CHECK(dot.find("1 added, 3 changed, 1 removed") != std::string::npos);
  const auto [nodes, edges] = readBack(dot);
  if (nodes >= 0) CHECK(static_cast<size_t>(nodes) == countText(dot).nodes());
  (void)edges;
  // GraphViz accepts every label (renderDot throws when it drops one).
  if (session::graphvizAvailable()) {
    const std::string png = session::renderDot(dot, "png");
    CHECK(png.substr(1, 3) == "PNG");
  }
}

TEST_CASE("Edit-log drawings: a replaced constant marks its readers, an empty log marks nothing") {
  test::ParsedGraph p = smallGraph();
  ir::EditLog log;
  log.setKeepText(true);
  SECTION("setConstant: the conv reading the weight is changed") {
    ir::Rewriter rw(*p.graph, log, "scale-weight");
    p.graph->walk([&](ir::Node* n) {
      if (n->opcode() == ir::Opcode::GetAttr) rw.setConstant(n, p.constants->at(n->target()).toTensor() * 2);
    });
    draw::DiffCounts counts;
    const std::string dot = draw::writeDotChanges(*p.graph, log.changesSince(0), {}, &counts);
    CHECK(counts.changed == 1);
    CHECK(counts.added == 0);
    CHECK(counts.removed == 0);
    CHECK(dot.find("weight updated") != std::string::npos);
    CHECK(occurrences(dot, "fillcolor=\"#fff0a0\"") == 1);
  }
  SECTION("must not mark: nothing logged, nothing coloured") {
    draw::DiffCounts counts;
    const std::string dot = draw::writeDotChanges(*p.graph, log.changesSince(0), {}, &counts);
    CHECK(counts.added + counts.changed + counts.removed == 0);
    CHECK(dot.find("fillcolor=\"#c8efc8\"") == std::string::npos);
    CHECK(dot.find("fillcolor=\"#fff0a0\"") == std::string::npos);
    CHECK(dot.find("dashed color=\"#9a9a9a\"") == std::string::npos);
    CHECK(countText(dot).irNodes == countText(draw::writeDot(*p.graph)).irNodes);
  }
}

TEST_CASE("Edit-log drawings of a real model: every removed node is drawn from its text, beside its anchor") {
  ir::Model m = test::importFixture(test::fixture("resnet18_script"));
  ir::Graph& g = m.forward();
  // functionalize first: the scripted ResNet's relus are in place (relu_).
  test::runPipeline(g, "functionalize");
  const size_t relus = test::countOps(g, "aten::relu");
  REQUIRE(relus > 0);
  rewriters::PassRegistry registry;
  registry.add([] { return std::make_unique<ReluToHardtanhPass>(); });
  rewriters::Instrumentation inst;
  inst.wantChanges = true;
  inst.checkEditLog = true;
  std::string dot;
  draw::DiffCounts counts;
  inst.onPassEnd = [&](const rewriters::PassExecution& e, const ir::Graph& after) {
    REQUIRE(e.changes != nullptr);
    dot = draw::writeDotChanges(after, *e.changes, {}, &counts);
  };
  rewriters::PassContext ctx;
  rewriters::PassManager(registry, rewriters::parsePipeline("test-relu-to-hardtanh", registry), inst).run(g, ctx);
  const size_t replaced = relus - test::countOps(g, "aten::relu");
  CHECK(replaced == test::countOps(g, "aten::hardtanh"));
  CHECK(counts.added == replaced);
  CHECK(counts.removed == replaced);
  CHECK(countText(dot).removed == replaced);
  CHECK(occurrences(dot, "<B>relu</B>") == replaced);  // old labels, parsed back from the log's text
  CHECK(counts.changed >= test::countOps(g, "aten::conv2d"));
  const auto [nodes, edges] = readBack(dot);
  if (nodes >= 0) CHECK(static_cast<size_t>(nodes) == countText(dot).nodes());
  (void)edges;
  if (session::graphvizAvailable()) CHECK(session::renderDot(dot, "svg").find("<svg") != std::string::npos);
}
