// rules: rule file parsing (and its errors), the rules pass, and the example
// rule file on a real model.
#include "ir/lint.h"
#include "ir/text.h"
#include "rewriters/rules.h"
#include "tests/support/checked_run.h"
#include "tests/support/fixtures.h"
#include "tests/support/ir_check.h"
#include "api/api.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {

std::string repoRoot() {
  // This file is tests/rewriters/rules_test.cpp under the repository root.
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
}

std::string writeTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("ptopt_rules_test_" + name);
  std::ofstream(path) << text;
  return path.string();
}

// Through the PassManager with the edit-log check (and the IR lint) on.
PassResult runRules(ir::Graph& g, const std::string& path, PassContext& ctx) {
  PassResult r = test::runPassChecked(g, "rules", ctx, {{"file", path}});
  ir::lintOrThrow(g, "after rules");
  return r;
}

// Expects parseRules(text) to fail at line:column with `what` in the message.
void expectError(const std::string& text, size_t line, size_t column, const std::string& what) {
  INFO(text);
  try {
    parseRules(text, "my.rules");
    FAIL("no error");
  } catch (const RuleFileError& e) {
    INFO(e.what());
    CHECK(e.line() == line);
    CHECK(e.column() == column);
    CHECK_THAT(e.message(), Catch::Contains(what));
    const std::string prefix = "my.rules:" + std::to_string(line) + ":" + std::to_string(column) + ": ";
    CHECK_THAT(std::string(e.what()), Catch::StartsWith(prefix));
    // The offending line, then a caret under the column.
    CHECK_THAT(std::string(e.what()), Catch::EndsWith("\n  " + std::string(column - 1, ' ') + "^"));
  }
}

const char* kRules = R"(# Two rules.
rule double-relu   # a comment
  pattern
    graph(%x : Tensor):
      %a : Tensor = aten::relu(%x)
      # comments inside the graph are fine
      %b : Tensor = aten::relu(%a)
      output(%b)

  replacement
    graph(%x : Tensor):
      %a : Tensor = aten::relu(%x)
      output(%a)

rule add-to-sub
  pattern
    graph(%x : Tensor, %y : Tensor, %alpha : Scalar):
      %z : Tensor = aten::add.Tensor(%x, %y, %alpha)
      output(%z)
  replacement
    graph(%x : Tensor, %y : Tensor, %alpha : Scalar):
      %z : Tensor = aten::sub.Tensor(%x, %y, %alpha)
      output(%z)
  where %alpha in {1, 2}   # only these
  where %y is value  # not {a literal}
)";

}  // namespace

TEST_CASE("rules pass applies every rule of a file and counts per rule") {
  const std::string path = writeTemp("two.rules", kRules);
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %r1 : Tensor = aten::relu(%x)\n"
      "  %r2 : Tensor = aten::relu(%r1)\n"
      "  %r3 : Tensor = aten::relu(%y)\n"
      "  %r4 : Tensor = aten::relu(%r3)\n"
      "  %a1 : Tensor = aten::add.Tensor(%r2, %r4, 1)\n"
      "  %a2 : Tensor = aten::add.Tensor(%a1, %r4, 3)\n"
      "  %a3 : Tensor = aten::add.Tensor(%a2, %a2, 2)\n"
      "  output(%a3)\n");
  PassContext ctx;
  PassResult r = runRules(*g, path, ctx);
  CHECK(r.changed);
  CHECK(r.counter("double-relu") == 2);
  CHECK(r.counter("add-to-sub") == 2);
  CHECK(r.countersText() == "double-relu=2 add-to-sub=2");
  test::checkIR(g->str(), R"(
    # CHECK: %r2 : Tensor = aten::relu(%x)
    # CHECK: %r4 : Tensor = aten::relu(%y)
    # CHECK: %a1 : Tensor = aten::sub.Tensor(%r2, %r4, 1)
    # CHECK: %a2 : Tensor = aten::add.Tensor(%a1, %r4, 3)
    # CHECK: %a3 : Tensor = aten::sub.Tensor(%a2, %a2, 2)
  )");
  // The where clause explains why alpha=3 was left alone.
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines()[0],
             Catch::Contains("rule 'add-to-sub': %alpha is 3, rejected by 'where %alpha in {1, 2}' (line 24)"));

  SECTION("a second run reuses the parsed file and changes nothing") {
    RulesPass pass;
    pass.configure({{"file", path}});
    PassContext ctx2;
    CHECK(pass.run(*g, ctx2).changed == false);
    std::remove(path.c_str());  // cached: the file is not read again
    CHECK_FALSE(pass.run(*g, ctx2).changed);
  }
  std::remove(path.c_str());
}

TEST_CASE("rules where clauses") {
  const std::string text = R"(rule scale
  pattern
    graph(%x : Tensor, %w : Tensor):
      %y : Tensor = aten::mul.Tensor(%x, %w)
      output(%y)
  replacement
    graph(%x : Tensor, %w : Tensor):
      %y : Tensor = aten::div.Tensor(%x, %w)
      output(%y)
  where %w is constant
rule hardtanh
  pattern
    graph(%x : Tensor, %lo : Scalar, %hi : Scalar):
      %y : Tensor = aten::hardtanh(%x, %lo, %hi)
      output(%y)
  replacement
    graph(%x : Tensor, %lo : Scalar, %hi : Scalar):
      %y : Tensor = aten::clamp(%x, %lo, %hi)
      output(%y)
  where %lo not in {0.0, -1.0}
  where %hi is literal
)";
  auto rules = parseRules(text, "where.rules");
  REQUIRE(rules.size() == 2);
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %v : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %m1 : Tensor = aten::mul.Tensor(%x, %w)\n"
      "  %m2 : Tensor = aten::mul.Tensor(%m1, %v)\n"
      "  %h1 : Tensor = aten::hardtanh(%m2, 0.0, 6.0)\n"
      "  %h2 : Tensor = aten::hardtanh(%h1, 1.0, 6.0)\n"
      "  output(%h2)\n");
  PassContext ctx;
  RewriteOptions opts;
  opts.ctx = &ctx;
  RewriteStats s = applyRules(*g, rules, opts);
  CHECK(s.perRule == std::vector<size_t>{1, 1});
  test::checkIR(g->str(), R"(
    # CHECK: aten::div.Tensor(%x, %w)
    # CHECK: aten::mul.Tensor(%m1, %v)
    # CHECK: aten::hardtanh(%m2, 0.0, 6.0)
    # CHECK: aten::clamp(%h1, 1.0, 6.0)
  )");
  CHECK(ctx.declines().size() == 2);
  CHECK_THAT(ctx.declines()[0], Catch::Contains("%w is bound to %v, which is not a constant (get_attr)"));
  CHECK_THAT(ctx.declines()[1], Catch::Contains("%lo is 0.0, rejected by 'where %lo not in {0.0, -1.0}'"));
}

TEST_CASE("rules file errors point at the line and column") {
  const std::string pattern =
      "rule r\n"
      "  pattern\n"
      "    graph(%x : Tensor):\n"
      "      %a : Tensor = aten::relu(%x)\n"
      "      output(%a)\n";
  const std::string replacement =
      "  replacement\n"
      "    graph(%x : Tensor):\n"
      "      %a : Tensor = aten::tanh(%x)\n"
      "      output(%a)\n";

  SECTION("syntax") {
    expectError("  rule r\n", 1, 3, "expected 'rule NAME'");
    expectError("rules r\n", 1, 1, "expected 'rule NAME', got 'rules'");
    expectError("rule\n", 1, 5, "expected a rule name");
    expectError("rule a/b\n", 1, 7, "a rule name holds letters");
    expectError(pattern, 1, 1, "rule 'r' has no 'replacement' section");
    expectError(pattern + replacement + "  replace\n", 10, 3, "expected 'pattern', 'replacement' or 'where'");
    expectError(pattern + replacement + pattern, 10, 6, "rule 'r' is defined twice");
    expectError("rule r\n  pattern\n  replacement\n", 2, 3, "expected a graph(...) indented under 'pattern'");
    expectError("rule r\n  pattern graph(%x : Tensor):\n", 2, 11, "the graph goes on the next lines");
    expectError("rule r\n \tpattern\n", 2, 2, "indent with spaces, not tabs");
  }

  SECTION("IR errors inside a graph keep the file's lines and columns") {
    const std::string bad =
        "# leading comment\n"
        "rule r\n"
        "  pattern\n"
        "    graph(%x : Tensor):\n"
        "      %a : Tensor = aten::rleu(%x)\n"
        "      output(%a)\n" +
        replacement;
    expectError(bad, 5, 21, "unknown operator 'aten::rleu'");
    expectError(pattern + "  replacement\n    graph(%x : Tensor):\n      output(%y)\n", 8, 14,
                "use of undefined value %y");
  }

  SECTION("pattern and replacement must agree") {
    expectError(pattern + "  replacement\n    graph(%x : Tensor, %y : Tensor):\n      output(%x)\n", 7, 5,
                "the replacement has 2 input(s) but the pattern has 1");
    expectError(pattern + "  replacement\n    graph(%x : Tensor):\n      output(%x, %x)\n", 7, 5,
                "the replacement has 2 output(s) but the pattern has 1");
    expectError("rule r\n  pattern\n    graph(%x : Tensor, %u : int):\n      %a : Tensor = aten::relu(%x)\n"
                "      output(%a)\n" + replacement,
                3, 5, "input %u is unused");
  }

  SECTION("where clauses") {
    expectError(pattern + replacement + "  where %alpha in {1}\n", 10, 9,
                "unknown wildcard %alpha (the pattern's inputs: %x)");
    expectError(pattern + replacement + "  where %x in {1, [2}\n", 10, 21, "expected");
    expectError(pattern + replacement + "  where %x in {1, %x}\n", 10, 19, "expected a literal, not a value");
    expectError(pattern + replacement + "  where %x in {}\n", 10, 16, "expected at least one literal");
    expectError(pattern + replacement + "  where %x in {1\n", 10, 15, "unterminated '{'");
    expectError(pattern + replacement + "  where %x is tensor\n", 10, 15, "expected literal, value or constant");
    expectError(pattern + replacement + "  where %x equals 1\n", 10, 12, "expected 'in {...}'");
  }

  SECTION("a missing file") {
    RulesPass pass;
    pass.configure({{"file", "/nonexistent/x.rules"}});
    PassContext ctx;
    auto g = ir::parseGraph("graph(%x : Tensor):\n  output(%x)\n");
    CHECK_THROWS_WITH(pass.run(*g, ctx), Catch::Contains("cannot read rule file '/nonexistent/x.rules'"));
  }
}

TEST_CASE("rules example file rewrites mobilenet_v2 with bitwise equal outputs") {
  const auto& f = test::fixture("mobilenet_v2_script");
  const std::string rules = repoRoot() + "/examples/rules/example.rules";
  Optimizer opt = Optimizer::load(f.path);
  auto report = test::runChecked(opt.model(), "rules{file=\"" + rules + "\"}");  // edit-log check on
  INFO(report.countersSummary());
  CHECK(report.changed());
  int64_t relu6 = 0, dropout = 0;
  for (const auto& e : report.executions) {
    relu6 += e.result.counter("hardtanh-inplace-to-relu6");
    dropout += e.result.counter("eval-dropout");
  }
  CHECK(relu6 == 35);
  CHECK(dropout == 1);
  const std::string ir = ir::printGraph(opt.model().forward());
  test::checkIR(ir, R"(
    # CHECK: aten::relu6_
    # CHECK-NOT: aten::hardtanh
    # CHECK-NOT: aten::dropout
  )");
  CHECK(ir.find("aten::hardtanh") == std::string::npos);
  CHECK(ir.find("aten::dropout") == std::string::npos);
  auto v = opt.verify(f.inputs, {}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  CHECK(v.bitwiseEqual);
}

TEST_CASE("RulesDoesNotFireWhenNoRuleMatches") {
  const std::string path = writeTemp("nomatch.rules", kRules);
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %r1 : Tensor = aten::relu(%x)\n"
      "  %t : Tensor = aten::tanh(%r1)\n"
      "  %a : Tensor = aten::add.Tensor(%t, %y, 5)\n"
      "  output(%a)\n");
  const std::string before = g->str();
  PassContext ctx;
  PassResult r = runRules(*g, path, ctx);
  CHECK_FALSE(r.changed);
  CHECK(r.counters.empty());
  CHECK(ctx.edits.size() == 0);
  CHECK(g->str() == before);
  // The add matched structurally; its where clause said no, and why.
  REQUIRE(ctx.declines().size() == 1);
  CHECK_THAT(ctx.declines()[0], Catch::Contains("%alpha is 5"));
  std::remove(path.c_str());
}
