// DOT drawings (ir/dot.h) and their rendering (tools/render.h): the text
// reads back with GraphViz's cgraph (agmemread) when the build has it, node
// and edge counts match the IR, labels carry the op, key literals, constants
// and metadata, clusters follow module scopes, and a diff shows a conv+bn
// fold in its colours with provenance.
#include "ir/dot.h"
#include "tests/support/pass_test.h"
#include "tools/render.h"

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
      ir::DotOptions o;
      o.maxNodes = 0;
      checkCounts(g, ir::writeDot(g, o), false);
      o.showConstants = true;
      checkCounts(g, ir::writeDot(g, o), true);
    }
  }
}

TEST_CASE("Labels show the op, key literals, folded constants, dtype/shape and a channels-last badge") {
  ir::Model m = importWithShapes(test::fixture("resnet18_script"));
  ir::Graph& g = m.forward();
  const std::string dot = ir::writeDot(g);
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
  const std::string cl = ir::writeDot(g);
  CHECK(occurrences(cl, "<B>[CL]</B>") == 20);

  // Colour by dtype: the legend lists the dtypes it saw.
  ir::DotOptions byDtype;
  byDtype.colorBy = ir::DotColorBy::Dtype;
  const std::string dtypeDot = ir::writeDot(g, byDtype);
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
  const ir::GraphStats s = ir::graphStats(*g);
  CHECK(s.casts == 2);
  CHECK(s.layoutConversions == 1);
  CHECK(s.opCounts.at("to") == 2);
  CHECK(s.opCounts.at("relu") == 1);
  CHECK(s.parameterBytes == 0);

  ir::Model m = test::importFixture(test::fixture("resnet18_script"));
  // resnet18 has 11.69 M float parameters (plus BatchNorm buffers).
  const size_t bytes = ir::graphStats(m.forward()).parameterBytes;
  CHECK(bytes > 11'600'000 * 4);
  CHECK(bytes < 11'800'000 * 4);
  CHECK(ir::writeDot(*g).find("2 casts · 1 layout conversions") != std::string::npos);
}

TEST_CASE("Option --depth collapses deeper scopes into one box each, with merged edges") {
  ir::Model m = test::importFixture(test::fixture("resnet18_script"));
  ir::DotOptions o;
  o.depth = 1;
  const std::string dot = ir::writeDot(m.forward(), o);
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
  ir::DotOptions o;
  o.maxNodes = 200;
  const std::string dot = ir::writeDot(m.forward(), o);
  const Counts c = countText(dot);
  CHECK(c.nodes() <= 201);
  CHECK(dot.find("--max-nodes") != std::string::npos);
  readBack(dot);
  // Plenty of room: nothing is collapsed.
  o.maxNodes = 0;
  const Counts all = countText(ir::writeDot(m.forward(), o));
  CHECK(all.summaries == 0);
  CHECK(all.irNodes == expectedCounts(m.forward(), false).irNodes);
}

TEST_CASE("Control flow: blocks are boxes, their results join the If/Loop") {
  ir::Model m = test::importFixture(test::fixture("control_flow"));
  const std::string dot = ir::writeDot(m.forward());
  CHECK(dot.find("If: then") != std::string::npos);
  CHECK(dot.find("If: else") != std::string::npos);
  CHECK(dot.find("Loop body") != std::string::npos);
  CHECK(dot.find("label=\"body\"") != std::string::npos);
  CHECK(dot.find("<B>yield</B>") != std::string::npos);
}

TEST_CASE("Node matching pairs a graph with its folded self; the diff shows the fold") {
  ir::Model before = test::importFixture(test::fixture("resnet18_script"));
  ir::Model after = before.clone();
  test::runPipeline(after.forward(), "fold-conv-bn");

  // Provenance survives cloneGraph.
  auto copy = ir::cloneGraph(after.forward());
  size_t withProvenance = 0;
  copy->walk([&](ir::Node* n) { withProvenance += !n->provenance().empty(); });
  CHECK(withProvenance == 20);

  const ir::NodeMatching m = ir::matchNodes(before.forward(), after.forward());
  // Every conv of the result is matched to a conv (the one it was).
  after.forward().walk([&](ir::Node* n) {
    if (!n->is("aten::conv2d")) return;
    const ir::Node* b = m.before(n);
    REQUIRE(b != nullptr);
    CHECK(b->is("aten::conv2d"));
    CHECK(b->scope() == n->scope());
  });

  ir::DiffCounts counts;
  const std::string dot = ir::writeDotDiff(before.forward(), after.forward(), {}, &counts);
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
    ir::DiffCounts c1;
    const std::string d1 = ir::writeDotDiff(before.forward(), o1.forward(), {}, &c1);
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
  const ir::NodeMatching m = ir::matchNodes(a.forward(), b.forward());
  size_t convsMatched = 0;
  b.forward().walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") && m.before(n) && m.before(n)->is("aten::conv2d")) ++convsMatched;
  });
  CHECK(convsMatched == 20);
  ir::DiffCounts counts;
  ir::writeDotDiff(a.forward(), b.forward(), {}, &counts);
  CHECK(counts.removed == 20);
  CHECK(counts.added == 0);
  CHECK(counts.changed == 20);
}

TEST_CASE("A graph diffed with itself has no changes") {
  for (const char* name : {"mobilenet_v2_script", "control_flow", "inplace_ops"}) {
    DYNAMIC_SECTION(name) {
      ir::Model a = test::importFixture(test::fixture(name));
      ir::Model b = a.clone();
      ir::DiffCounts counts;
      const std::string dot = ir::writeDotDiff(a.forward(), b.forward(), {}, &counts);
      CHECK(counts.added == 0);
      CHECK(counts.changed == 0);
      CHECK(counts.removed == 0);
      CHECK(dot.find("color=\"#2e8b3a\" penwidth=1.6") == std::string::npos);  // no added edges
    }
  }
}

TEST_CASE("Rendering: resnet18 to SVG in-process, or a clear error without GraphViz") {
  ir::Model m = test::importFixture(test::fixture("resnet18_script"));
  const std::string dot = ir::writeDot(m.forward());
  if (!tools::graphvizAvailable()) {
    CHECK_THROWS_WITH(tools::renderDot(dot, "svg"), Catch::Contains("built without GraphViz"));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string svg = tools::renderDot(dot, "svg");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WARN("resnet18 rendered to SVG in " << seconds << " s (" << svg.size() << " bytes)");
  CHECK(seconds < 60);  // a sanity bound only; the goal is a few seconds
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("conv2d") != std::string::npos);
  const std::string png = tools::renderDot(dot, "png");
  CHECK(png.substr(1, 3) == "PNG");
  CHECK_THROWS(tools::renderDot(dot, "no-such-format"));
  // A diff renders without GraphViz rejecting any label (renderDot throws
  // when it does: an empty <B></B> once cost the diff its legend).
  ir::Model after = m.clone();
  test::runPipeline(after.forward(), "-O1");
  const std::string diffSvg = tools::renderDot(ir::writeDotDiff(m.forward(), after.forward()), "svg");
  CHECK(diffSvg.find("before") != std::string::npos);
}
