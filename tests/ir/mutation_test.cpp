// ir::MutationAnalysis and the per-use rule: aliases through views,
// containers, control flow; identity apart from writes; returned tuples.
#include "ir/mutation.h"
#include "ir/text.h"

#include <catch2/catch.hpp>

using namespace ptopt;

TEST_CASE("mutation analysis follows views, dropout and loop-carried values") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %n : int):\n"
      "  %a : Tensor = aten::clone(%x, None)\n"
      "  %v : Tensor = aten::view(%a, [-1])\n"
      "  %w : Tensor = aten::relu_(%v)\n"
      "  %b : Tensor = aten::clone(%x, None)\n"
      "  %d : Tensor = aten::dropout(%b, 0.5, False)\n"
      "  %e : Tensor = aten::sigmoid_(%d)\n"
      "  %c : Tensor = aten::clone(%x, None)\n"
      "  %r : Tensor = prim::Loop(%n, True, %c)\n"
      "    block0(%i : int, %h : Tensor):\n"
      "      %h2 : Tensor = aten::add_.Scalar(%h, 1, 1)\n"
      "      output(True, %h2)\n"
      "  %f : Tensor = aten::clone(%x, None)\n"
      "  %t : Tuple[Tensor, Tensor, Tensor, Tensor] = prim::TupleConstruct(%w, %e, %r, %f)\n"
      "  output(%t)\n");
  const ir::MutationAnalysis m(*g);
  auto v = [&](const char* name) { return g->findValue(name); };
  CHECK(m.mayBeWritten(v("a")));  // through the view
  // dropout may return its input: a merge must not assume otherwise, while
  // the write classes follow its fresh-result schema.
  CHECK(m.mayBeMutated(v("b")));
  CHECK_FALSE(m.mayBeWritten(v("b")));
  CHECK(m.mayBeWritten(v("c")));  // carried into the loop body
  CHECK_FALSE(m.mayBeWritten(v("x")));  // clone copies
  // A tuple only the graph returns does not make its elements alias: %f
  // stays unwritten, but it escapes.
  CHECK_FALSE(m.mayBeWritten(v("f")));
  CHECK(m.mayEscape(v("f")));
  CHECK_FALSE(m.mayEscape(v("x")));
  CHECK_FALSE(m.mayBeMutated(v("n")));  // ints are never mutated
  CHECK(m.writtenConstants().empty());
}

TEST_CASE("identity comparisons forbid merging, not folding") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %a : Tensor = aten::relu(%x)\n"
      "  %s : bool = aten::__is__(%a, %y)\n"
      "  output(%s)\n");
  const ir::MutationAnalysis m(*g);
  const ir::Value* a = g->findValue("a");
  CHECK_FALSE(m.mayBeWritten(a));  // folding may read it
  CHECK(m.mayBeMutated(a));         // merging may not replace it
}

TEST_CASE("mayBeReshaped: in-place geometry changes, out= arguments and identity, not writes of data") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %a : Tensor = aten::clone(%x, None)\n"
      "  %va : Tensor = aten::slice.Tensor(%a, 0, 0, 9223372036854775807, 1)\n"
      "  %w : Tensor = aten::add_.Tensor(%va, %y, 1)\n"
      "  %b : Tensor = aten::clone(%x, None)\n"
      "  %vb : Tensor = aten::slice.Tensor(%b, 0, 0, 9223372036854775807, 1)\n"
      "  %u : Tensor = aten::unsqueeze_(%vb, 0)\n"
      "  %c : Tensor = aten::clone(%x, None)\n"
      "  %o : Tensor = aten::relu.out(%y, %c)\n"
      "  %d : Tensor = aten::clone(%x, None)\n"
      "  %s : bool = aten::__is__(%d, %y)\n"
      "  output(%w, %u, %o, %d, %s)\n");
  const ir::MutationAnalysis m(*g);
  auto v = [&](const char* name) { return g->findValue(name); };
  CHECK(m.mayBeMutated(v("a")));
  CHECK_FALSE(m.mayBeReshaped(v("a")));  // add_ writes data only
  CHECK_FALSE(m.mayBeReshaped(v("va")));
  CHECK(m.mayBeReshaped(v("b")));  // unsqueeze_ through the view
  CHECK(m.mayBeReshaped(v("c")));  // an out= argument may be resized
  CHECK(m.mayBeReshaped(v("d")));  // compared by identity
  CHECK_FALSE(m.mayBeReshaped(v("x")));
}

TEST_CASE("the per-use rule sees direct writes only") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::clone(%x, None)\n"
      "  %v : Tensor = aten::view(%a, [-1])\n"
      "  %w : Tensor = aten::relu_(%v)\n"
      "  %l : List[Tensor] = prim::ListConstruct(%x)\n"
      "  %u : Tensor = prim::ListUnpack(%l)\n"
      "  output(%w, %u)\n");
  CHECK(ir::anyUseMayWrite(g->findValue("v")));        // relu_ writes its self
  CHECK_FALSE(ir::anyUseMayWrite(g->findValue("a")));  // only through the view
  CHECK_FALSE(ir::anyUseMayWrite(g->findValue("x")));  // ListConstruct only reads
  CHECK(ir::anyUseMayWrite(g->findValue("l")));        // a schema-less op it does not know to only read
  // The analysis, following aliases, sees both.
  const ir::MutationAnalysis m(*g);
  CHECK(m.mayBeWritten(g->findValue("a")));
}
