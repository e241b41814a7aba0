// The linter catches each broken invariant.
#include "ir/ir.h"
#include "ir/lint.h"
#include "ir/text.h"

#include <catch2/catch.hpp>

using namespace ptopt::ir;

namespace {

std::string allIssues(const Graph& g) {
  std::string out;
  for (const auto& i : lint(g)) out += i.message + "\n";
  return out;
}

// x -> relu -> sigmoid -> output
std::unique_ptr<Graph> chain() {
  return parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::relu(%x)\n"
      "  %b : Tensor = aten::sigmoid(%a)\n"
      "  output(%b)\n");
}

}  // namespace

TEST_CASE("lint accepts a sound graph") { CHECK(lint(*chain()).empty()); }

TEST_CASE("lint catches a use before the definition") {
  auto g = chain();
  Node* relu = g->findValue("a")->node();
  Node* sigmoid = g->findValue("b")->node();
  sigmoid->moveBefore(relu);
  CHECK_THAT(allIssues(*g), Catch::Contains("uses %a before its definition"));
  CHECK_THROWS_AS(lintOrThrow(*g), LintError);
}

TEST_CASE("lint catches a broken use list") {
  auto g = chain();
  Node* sigmoid = g->findValue("b")->node();
  sigmoid->setArgUnchecked(0, g->findValue("x"));
  const std::string issues = allIssues(*g);
  CHECK_THAT(issues, Catch::Contains("broken use list: 'sigmoid' uses %x") ||
                         Catch::Contains("broken use list"));
  CHECK_THAT(issues, Catch::Contains("%a lists a use"));
}

TEST_CASE("lint catches a value defined twice") {
  auto g = chain();
  g->findValue("b")->setNameUnchecked("a");
  CHECK_THAT(allIssues(*g), Catch::Contains("value %a is defined twice"));
}

TEST_CASE("lint catches dangling uses and values") {
  auto g = chain();
  g->findValue("a")->node()->detachUnchecked();  // its output is still used, its input still lists it
  const std::string issues = allIssues(*g);
  CHECK_THAT(issues, Catch::Contains("dangling use: %x"));
  CHECK_THAT(issues, Catch::Contains("dangling value"));
}

TEST_CASE("lint catches a block value used outside its scope") {
  auto g = parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %r : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %inner : Tensor = aten::relu(%x)\n"
      "      output(%inner)\n"
      "    block1():\n"
      "      output(%x)\n"
      "  output(%r)\n");
  REQUIRE(lint(*g).empty());
  g->block()->outputNode()->setArg(0, g->findValue("inner"));
  CHECK_THAT(allIssues(*g), Catch::Contains("uses %inner outside the block that defines it"));
}

TEST_CASE("lint catches a dependency cycle") {
  auto g = chain();
  Node* relu = g->findValue("a")->node();
  relu->setArg(0, g->findValue("b"));  // relu(sigmoid(relu(...)))
  const std::string issues = allIssues(*g);
  CHECK_THAT(issues, Catch::Contains("form a cycle"));
  CHECK_THAT(issues, Catch::Contains("uses %b before its definition"));
}

TEST_CASE("lint catches misplaced output and placeholder nodes and unknown constants") {
  auto g = chain();
  Node* extra = g->createNode(Opcode::Placeholder);
  extra->addOutput(c10::TensorType::get(), "late");
  extra->insertBefore(g->block()->outputNode());
  Node* getattr = g->createGetAttr("missing.weight", c10::TensorType::get());
  getattr->insertBefore(g->block()->outputNode());
  const std::string issues = allIssues(*g);
  CHECK_THAT(issues, Catch::Contains("placeholders must open the top-level block"));
  CHECK_THAT(issues, Catch::Contains("names a constant that does not exist"));
  g->block()->outputNode()->moveBefore(g->findValue("b")->node());
  CHECK_THAT(allIssues(*g), Catch::Contains("output node is not the last"));
}
