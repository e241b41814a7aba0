// The text form: print -> parse -> print round trip, literals, errors.
#include "ir/ir.h"
#include "ir/lint.h"
#include "ir/text.h"

#include <catch2/catch.hpp>

using namespace ptopt::ir;

namespace {

const char* kEverything =
    "graph(%x : Tensor{float32, [1, 3, 8, 8], channels_last, cpu}, %n : int, %opt : Optional[Tensor]):\n"
    "  %w : Tensor = get_attr[\"conv1.weight\"]\n"
    "  %y : Tensor = aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], 1)\n"
    "  %z : Tensor = aten::to.dtype(%y, torch.float16, False, False, torch.preserve_format)\n"
    "  %e : Tensor = aten::empty.memory_format([2, 3], torch.float32, torch.strided, device(\"cpu\"), False, torch.channels_last)\n"
    "  %l : List[float] = prim::ListConstruct(1.5, -2.0, 1e-05, inf, -inf)\n"
    "  %b : List[bool] = prim::ListConstruct(True, False)\n"
    "  %s : str = aten::format(\"a \\\"quoted\\\" \\\\ string\\n\", float[], int[], bool[], str[], [\"p\", \"q\"], [True, False], [0.5, 2.0])\n"
    "  %isinst : bool = prim::isinstance[types=types(Tensor, List[int])](%opt)\n"
    "  %t : Tuple[Tensor, int] = prim::TupleConstruct(%z, %n)\n"
    "  %r : Tensor = prim::If(%isinst)\n"
    "    block0():\n"
    "      %r1 : Tensor = aten::relu(%y)\n"
    "      output(%r1)\n"
    "    block1():\n"
    "      %h : Tensor = prim::Loop(%n, True, %y)\n"
    "        block0(%i : int, %h.in : Tensor):\n"
    "          %h.next : Tensor = aten::add.Scalar(%h.in, %i, 1)\n"
    "          output(True, %h.next)\n"
    "      output(%h)\n"
    "  %d : Dict[str, Tensor] = prim::DictConstruct(\"k\", %r)\n"
    "  output(%t)\n";

void expectParseError(const std::string& text, const std::string& message, size_t line, size_t column) {
  try {
    parseGraph(text);
    FAIL("expected a parse error: " << message);
  } catch (const ParseError& e) {
    CHECK_THAT(e.message(), Catch::Contains(message));
    CHECK(e.line() == line);
    CHECK(e.column() == column);
    CHECK_THAT(std::string(e.what()), Catch::Contains("^"));
  }
}

}  // namespace

TEST_CASE("every syntax element round-trips through the text form") {
  auto g = parseGraph(kEverything);
  CHECK(printGraph(*g) == kEverything);
  auto again = parseGraph(printGraph(*g));
  CHECK(printGraph(*again) == kEverything);
}

TEST_CASE("parsed literals have the right kinds") {
  auto g = parseGraph(kEverything);
  Node* to = g->findValue("z")->node();
  CHECK(to->arg(1).literal().as<c10::ScalarType>() == c10::ScalarType::Half);
  CHECK(to->arg(4).literal().as<c10::MemoryFormat>() == c10::MemoryFormat::Preserve);
  Node* empty = g->findValue("e")->node();
  CHECK(empty->arg(2).literal().as<c10::Layout>() == c10::kStrided);
  CHECK(empty->arg(3).literal().as<c10::Device>() == c10::Device("cpu"));
  Node* list = g->findValue("l")->node();
  CHECK(list->arg(2).literal().as<double>() == 1e-05);
  CHECK(std::isinf(list->arg(3).literal().as<double>()));
  Node* fmt = g->findValue("s")->node();
  CHECK(fmt->arg(0).literal().as<std::string>() == "a \"quoted\" \\ string\n");
  CHECK(fmt->arg(1).literal().is<std::vector<double>>());
  CHECK(fmt->arg(2).literal().is<std::vector<int64_t>>());
  Value* x = g->inputs()[0];
  CHECK(x->meta().shape == std::vector<int64_t>{1, 3, 8, 8});
  CHECK(x->meta().memoryFormat == c10::MemoryFormat::ChannelsLast);
  CHECK(g->findValue("t")->type()->str() == "(Tensor, int)");
}

TEST_CASE("doubles print as the shortest text that reads back exactly") {
  for (double d : {0.1, 1.0 / 3.0, 1e-5, 123456789.0, 1e300, -0.0, 2.5e-308}) {
    const std::string s = formatDouble(d);
    CHECK(std::stod(s) == d);
    CHECK(s.find_first_of(".en") != std::string::npos);
  }
}

TEST_CASE("comments and blank lines are ignored") {
  auto g = parseGraph(
      "# a pattern\n"
      "graph(%x : Tensor):\n"
      "\n"
      "  # relu it\n"
      "  %a : Tensor = aten::relu(%x)  # trailing comment\n"
      "  output(%a)\n");
  CHECK(g->numNodes() == 3);
}

TEST_CASE("parse errors name the problem and point at the column") {
  // Found by tests/fuzz/ir_text_fuzz: std::out_of_range escaped the parser.
  expectParseError("graph(%x : Tensor):\n  %a : Tensor = aten::mul.Scalar(%x, 99999999999999999999)\n  output(%a)\n",
                   "integer literal out of the 64-bit range", 2, 38);
  expectParseError("graph(%x : Tensor{float32, [99999999999999999999]}):\n  output(%x)\n",
                   "integer literal out of the 64-bit range", 1, 29);
  expectParseError("graph(%x : Tensor):\n  %a : Tensor = aten::relu(%y)\n  output(%a)\n",
                   "use of undefined value %y", 2, 28);
  expectParseError("graph(%x : Tensor):\n  %a : Tensor = aten::relu_nope(%x)\n  output(%a)\n",
                   "unknown operator 'aten::relu_nope'", 2, 17);
  expectParseError("graph(%x : Tensor):\n  %a : Tensor = aten::add.Nope(%x)\n  output(%a)\n",
                   "has no overload 'Nope'", 2, 17);
  expectParseError("graph(%x : Tensor):\n  %x : Tensor = aten::relu(%x)\n  output(%x)\n",
                   "value %x is defined twice", 2, 3);
  expectParseError("graph(%x : Tensor):\n  %a : Tensor = aten::relu(%x)\n",
                   "block does not end with 'output(...)'", 2, 3);
  expectParseError("graph(%x : Tensr):\n  output(%x)\n", "unknown type 'Tensr'", 1, 12);
  expectParseError("graph(%x : Tensor):\n  %a : List[int] = prim::ListConstruct([])\n  output(%x)\n",
                   "write an empty list with its type", 2, 40);
  expectParseError("graph(%x : Tensor):\n  %a : Tensor = aten::relu(%x\n  output(%a)\n",
                   "expected ')'", 2, 30);
  expectParseError("graph(%x : Tensor):\n  output(%x)\n  %a : Tensor = aten::relu(%x)\n",
                   "statement after 'output(...)'", 3, 3);
  expectParseError("graph(%x : Tensor):\n  %a : Tensor = aten::relu(%x) extra\n  output(%a)\n",
                   "unexpected 'extra'", 2, 32);
  expectParseError("graph(%x : Tensor):\n  %l : List[int] = prim::ListConstruct([1, 2.0])\n  output(%x)\n",
                   "one kind of element", 2, 40);
}

TEST_CASE("values of a nested block are not visible after it") {
  expectParseError(
      "graph(%x : Tensor, %c : bool):\n"
      "  %r : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %inner : Tensor = aten::relu(%x)\n"
      "      output(%inner)\n"
      "    block1():\n"
      "      output(%x)\n"
      "  output(%inner)\n",
      "use of undefined value %inner", 8, 10);
}

TEST_CASE("unknown operators are accepted for patterns when asked") {
  ParseOptions opts;
  opts.requireKnownOperators = false;
  auto g = parseGraph("graph(%x : Tensor):\n  %a : Tensor = mylib::fancy(%x)\n  output(%a)\n", opts);
  CHECK(g->findValue("a")->node()->schema() == nullptr);
}

TEST_CASE("parseType reads annotation strings") {
  CHECK(parseType("List[Optional[Tensor]]")->annotation_str() == "List[Optional[Tensor]]");
  CHECK(parseType("Dict[str, Tuple[int, float]]")->annotation_str() == "Dict[str, Tuple[int, float]]");
  CHECK(parseType("Tuple[()]")->annotation_str() == "Tuple[()]");
  CHECK_THROWS_AS(parseType("Frob"), ParseError);
}
