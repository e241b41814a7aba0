// The symbolic sizes of a dynamic .pt2 program (ir/pt2_symbols.h): sympy
// srepr parsed and evaluated, the sample points kept inside the ranges, and
// each varying size matched to an expression (the program's own first, then
// the generated forms), or to none.
#include "ir/pt2_symbols.h"

#include <catch2/catch.hpp>

using namespace ptopt;

namespace pt2_symbols_test {

const std::string kBatch = "Symbol('s77', positive=True, integer=True)";
const std::string kWidth = "Symbol('s53', positive=True, integer=True)";

ir::Pt2Shapes batchAndWidth() {
  ir::Pt2Shapes shapes;
  shapes.ranges["s77"] = {1, 64};
  shapes.ranges["s53"] = {32, std::nullopt};
  shapes.noteExpression(kBatch, 2);
  shapes.noteExpression(kWidth, 224);
  // A stride-2 conv's output width, as torch.export writes it.
  shapes.noteExpression("Add(FloorDiv(Add(" + kWidth + ", Integer(-1)), Integer(2)), Integer(1))", 112);
  shapes.inputDims = {{kBatch, "", "", kWidth}};
  return shapes;
}

}  // namespace pt2_symbols_test

using namespace pt2_symbols_test;

TEST_CASE("sympy srepr is parsed and evaluated as torch.export writes it") {
  const ir::SymbolValues at{{"s77", 5}, {"s53", 225}};
  auto e = ir::SymExpr::parse("Mul(Integer(4), " + kBatch + ")");
  REQUIRE(e);
  CHECK(e->evaluate(at) == 20);
  CHECK(e->symbols() == std::set<std::string>{"s77"});
  CHECK(ir::SymExpr::parse("Add(FloorDiv(Add(" + kWidth + ", Integer(-1)), Integer(2)), Integer(1))")->evaluate(at) == 113);
  CHECK(ir::SymExpr::parse("PythonMod(Integer(-7), Integer(3))")->evaluate(at) == 2);
  CHECK(ir::SymExpr::parse("Max(Integer(1), " + kBatch + ")")->evaluate(at) == 5);
  CHECK(ir::SymExpr::parse("Pow(" + kBatch + ", Integer(2))")->evaluate(at) == 25);
  // Unbound symbols, true division and unknown functions do not evaluate;
  // text that is not srepr does not parse.
  CHECK_FALSE(ir::SymExpr::parse("Symbol('s0', integer=True)")->evaluate(at));
  CHECK_FALSE(ir::SymExpr::parse("CleanDiv(Integer(7), Integer(2))")->evaluate(at));
  CHECK_FALSE(ir::SymExpr::parse("Sqrt(Integer(4))")->evaluate(at));
  CHECK_FALSE(ir::SymExpr::parse("s0 + (1"));
}

TEST_CASE("the sample points move each symbol on its own and together, inside its range, never to 0 or 1") {
  ir::Pt2Shapes shapes = batchAndWidth();
  shapes.ranges["s77"] = {1, 3};  // batch 2: only 3 fits above, and 1 is avoided
  const auto points = shapes.samplePoints(shapes.valuesFor({{2, 3, 224, 224}}));
  REQUIRE(points.size() == 5);  // base, batch 3, width 225 and 227, all moved
  CHECK(points[0] == ir::SymbolValues{{"s53", 224}, {"s77", 2}});
  for (const auto& p : points) {
    CHECK(p.at("s77") >= 2);
    CHECK(p.at("s77") <= 3);
    CHECK(p.at("s53") >= 32);
  }
  CHECK(points.back() == ir::SymbolValues{{"s53", 225}, {"s77", 3}});
  CHECK(shapes.inputSizesAt(points.back(), {{2, 3, 224, 224}}) == std::vector<std::vector<int64_t>>{{3, 3, 224, 225}});
  // Inputs of other sizes are the base.
  CHECK(shapes.valuesFor({{7, 3, 224, 100}}) == ir::SymbolValues{{"s53", 100}, {"s77", 7}});
}

TEST_CASE("a varying size is written as the program's expression, a linear form, a multiple or a product") {
  const ir::Pt2Shapes shapes = batchAndWidth();
  const auto points = shapes.samplePoints(shapes.hints);
  const ir::SizeExpressions sizes(shapes, points);
  auto traceOf = [&](auto f) {
    ir::SizeTrace t;
    for (const auto& p : points) t.push_back(f(p.at("s77"), p.at("s53")));
    return t;
  };
  std::optional<int64_t> constant;
  // Static: a number.
  CHECK_FALSE(sizes.match(traceOf([](int64_t, int64_t) { return 64; }), &constant));
  CHECK(constant == 64);
  // The program's own expression, as it wrote it.
  CHECK(sizes.match(traceOf([](int64_t, int64_t w) { return (w - 1) / 2 + 1; }), &constant) ==
        "Add(FloorDiv(Add(" + kWidth + ", Integer(-1)), Integer(2)), Integer(1))");
  CHECK_FALSE(constant);
  // a*s + b.
  CHECK(sizes.match(traceOf([](int64_t b, int64_t) { return 3 * b + 1; }), &constant) ==
        "Add(Mul(Integer(3), " + kBatch + "), Integer(1))");
  // A channels-last stride: channels times the program's width.
  CHECK(sizes.match(traceOf([](int64_t, int64_t w) { return 64 * ((w - 1) / 2 + 1); }), &constant) ==
        "Mul(Integer(64), Add(FloorDiv(Add(" + kWidth + ", Integer(-1)), Integer(2)), Integer(1)))");
  // A product of symbols (batch times sequence, flattened): an expression
  // that gives those values at every point.
  const ir::SizeTrace product = traceOf([](int64_t b, int64_t w) { return 4 * b * w; });
  const auto text = sizes.match(product, &constant);
  REQUIRE(text);
  const auto parsed = ir::SymExpr::parse(*text);
  REQUIRE(parsed);
  CHECK(parsed->symbols() == std::set<std::string>{"s53", "s77"});
  for (size_t i = 0; i < points.size(); ++i) CHECK(parsed->evaluate(points[i]) == product[i]);
  // Nothing ptopt knows: refused by the writer.
  CHECK_FALSE(sizes.match(traceOf([](int64_t b, int64_t w) { return b * b + w % 7; }), &constant));
  CHECK_FALSE(constant);
}
