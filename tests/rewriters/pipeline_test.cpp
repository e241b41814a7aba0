// Pipeline text: parse, canonical print, presets, and every class of error.
#include "rewriters/pipeline.h"
#include "rewriters/rules.h"
#include "api/api.h"

#include <catch2/catch.hpp>

#include <type_traits>

using namespace ptopt::rewriters;

namespace {

const PassRegistry& registry() { return ptopt::defaultRegistry(); }

void expectError(const std::string& text, const std::string& message, size_t column, size_t line = 1) {
  try {
    parsePipeline(text, registry());
    FAIL("expected an error for: " << text);
  } catch (const PipelineError& e) {
    INFO(e.what());
    CHECK_THAT(e.message(), Catch::Contains(message));
    CHECK(e.column() == column);
    CHECK(e.line() == line);
    CHECK_THAT(std::string(e.what()), Catch::Contains("^"));
  }
}

}  // namespace

TEST_CASE("pipelines parse and print canonically") {
  const std::string text = "canonicalize,fixpoint{max-iter=3}(cse,dce),const-fold";
  Pipeline p = parsePipeline(text, registry());
  REQUIRE(p.elements.size() == 3);
  CHECK(p.elements[1].isFixpoint());
  CHECK(p.elements[1].children.size() == 2);
  CHECK(printPipeline(p) == text);
  CHECK(printPipeline(parsePipeline(printPipeline(p), registry())) == text);
}

TEST_CASE("whitespace newlines and comments are allowed and vanish in the canonical form") {
  Pipeline p = parsePipeline(
      "# clean up\n"
      "canonicalize ,\n"
      "  fixpoint { max-iter = 2 } (   # repeat\n"
      "    cse, dce\n"
      "  )\n",
      registry(), "pipe.txt");
  CHECK(printPipeline(p) == "canonicalize,fixpoint{max-iter=2}(cse,dce)");
}

TEST_CASE("option values are canonicalized and quoted when needed") {
  Pipeline p = parsePipeline("fixpoint{max-iter=05}(dce),rules{file=\"my rules,v2.rules\"}", registry());
  CHECK(printPipeline(p) == "fixpoint{max-iter=5}(dce),rules{file=\"my rules,v2.rules\"}");
  CHECK(printPipeline(parsePipeline(printPipeline(p), registry())) == printPipeline(p));
}

TEST_CASE("the empty pipeline is valid") {
  CHECK(parsePipeline("", registry()).empty());
  CHECK(parsePipeline("  # nothing\n", registry()).empty());
}

TEST_CASE("presets expand to registered passes") {
  for (int level = 0; level <= 3; ++level) {
    const std::string text = presetPipeline(level);
    Pipeline p = parsePipeline(text, registry());
    CHECK(printPipeline(p) == text);
  }
  CHECK(presetPipeline(0).empty());
  CHECK_THROWS(presetPipeline(4));
}

TEST_CASE("unknown pass names suggest the nearest one") {
  expectError("canonicalize,ces", "unknown pass 'ces' (did you mean 'cse'?)", 14);
  expectError("dce,shape-porp", "did you mean 'shape-prop'?", 5);
  expectError("frobnicate", "unknown pass 'frobnicate' (see 'ptopt passes')", 1);
}

TEST_CASE("syntax errors point at the column") {
  expectError("cse,", "expected a pass name but the pipeline ended", 5);
  expectError("cse,,dce", "expected a pass name, got ','", 5);
  expectError("fixpoint{max-iter=3}(cse,dce", "expected ')' to close fixpoint(...)", 29);
  expectError("cse)", "unexpected ')' (no matching '(')", 4);
  expectError("fixpoint{max-iter=3}", "fixpoint needs a nested pipeline", 21);
  expectError("fixpoint()", "fixpoint needs at least one pass", 10);
  expectError("cse(dce)", "only fixpoint{...}(...) takes a nested pipeline", 4);
  expectError("fixpoint{max-iter}(cse)", "expected '=' after option 'max-iter'", 18);
  expectError("rules{file=\"x}", "unterminated string", 12);
  expectError("cse\n,dce\n,ces", "unknown pass 'ces'", 2, 3);
}

TEST_CASE("options are checked against the pass") {
  expectError("cse{depth=3}", "pass 'cse' has no option 'depth' (it takes none)", 5);
  expectError("fixpoint{max-iter=zero}(cse)", "expected an integer, got 'zero'", 19);
  expectError("fixpoint{max-iter=0}(cse)", "must be at least 1", 19);
  expectError("fixpoint{max-iter=2,max-iter=3}(cse)", "given twice", 21);
}

TEST_CASE("pipeline and rule-file errors are one class, TextError") {
  STATIC_REQUIRE(std::is_same_v<PipelineError, TextError>);
  STATIC_REQUIRE(std::is_same_v<RuleFileError, TextError>);
  // A rule file's error is caught as a PipelineError, with the same form.
  try {
    parseRules("rule\n", "my.rules");
    FAIL("no error");
  } catch (const PipelineError& e) {
    INFO(e.what());
    CHECK(e.line() == 1);
    CHECK_THAT(std::string(e.what()), Catch::StartsWith("my.rules:1:"));
    CHECK_THAT(std::string(e.what()), Catch::EndsWith("^"));
  }
}

TEST_CASE("pipelineUses and dropPass see passes inside fixpoints") {
  Pipeline p = parsePipeline("canonicalize,fixpoint{max-iter=3}(cse,fuse-cudnn,dce),fuse-cudnn", registry());
  CHECK(pipelineUses(p, "fuse-cudnn"));
  CHECK(pipelineUses(p, "dce"));
  CHECK_FALSE(pipelineUses(p, "remove-dropout"));
  CHECK_FALSE(pipelineUses(p, "fixpoint{max-iter=3}"));
  dropPass(p, "fuse-cudnn");
  CHECK(printPipeline(p) == "canonicalize,fixpoint{max-iter=3}(cse,dce)");
  CHECK_FALSE(pipelineUses(p, "fuse-cudnn"));
  dropPass(p, "remove-dropout");  // absent: nothing changes
  CHECK(printPipeline(p) == "canonicalize,fixpoint{max-iter=3}(cse,dce)");
}

// The one rule for extra passes: -O1,more and --rules files both go after
// the rewrites and before the closing device lowering (fuse-cudnn).
TEST_CASE("extra passes go after a preset's rewrites and before its closing fuse-cudnn") {
  for (int level = 1; level <= 3; ++level) {
    INFO("-O" << level);
    Pipeline p = parsePipeline(presetPipeline(level), registry());
    addExtraPasses(p, {rulesElement("a.rules"), rulesElement("b.rules")});
    CHECK(printPipeline(p) == presetPipelineBody(level) + ",rules{file=a.rules},rules{file=b.rules},fuse-cudnn");
    const std::string preset = "-O" + std::to_string(level);
    CHECK(printPipeline(parsePipelineOrPreset(preset + ",cse,dce", registry())) ==
          presetPipelineBody(level) + ",cse,dce,fuse-cudnn");
    CHECK(printPipeline(parsePipelineOrPreset(preset, registry())) == presetPipeline(level));
    // The same through the C++ API's parser.
    CHECK(printPipeline(ptopt::parsePipelineOrPreset(preset + ",cse")) ==
          presetPipelineBody(level) + ",cse,fuse-cudnn");
  }
  // A user's pipeline that closes with fuse-cudnn is treated the same.
  Pipeline closed = parsePipeline("canonicalize,fuse-cudnn", registry());
  addExtraPasses(closed, {rulesElement("r.rules")});
  CHECK(printPipeline(closed) == "canonicalize,rules{file=r.rules},fuse-cudnn");
}

TEST_CASE("extra passes go last when the pipeline does not close with fuse-cudnn") {
  Pipeline plain = parsePipeline("canonicalize,fixpoint{max-iter=3}(cse,dce)", registry());
  addExtraPasses(plain, {rulesElement("r.rules")});
  CHECK(printPipeline(plain) == "canonicalize,fixpoint{max-iter=3}(cse,dce),rules{file=r.rules}");
  // fuse-cudnn that is not last is not the closing lowering.
  Pipeline early = parsePipeline("fuse-cudnn,dce", registry());
  addExtraPasses(early, {rulesElement("r.rules")});
  CHECK(printPipeline(early) == "fuse-cudnn,dce,rules{file=r.rules}");
  // -O0 is empty: its extra passes are the whole pipeline.
  CHECK(printPipeline(parsePipelineOrPreset("-O0,cse", registry())) == "cse");
  Pipeline empty;
  addExtraPasses(empty, {rulesElement("r.rules")});
  CHECK(printPipeline(empty) == "rules{file=r.rules}");
  addExtraPasses(empty, {});
  CHECK(printPipeline(empty) == "rules{file=r.rules}");
}

TEST_CASE("an error in the passes after a preset points into them") {
  try {
    parsePipelineOrPreset("-O1,cse,ces", registry());
    FAIL("no error");
  } catch (const PipelineError& e) {
    INFO(e.what());
    CHECK_THAT(e.message(), Catch::Contains("unknown pass 'ces' (did you mean 'cse'?)"));
    CHECK(e.column() == 5);  // in "cse,ces"
    CHECK_THAT(std::string(e.what()), Catch::StartsWith("-O1,cse,ces:1:5: "));
  }
  // Not a preset: parsed as a pipeline ("-O4" is no pass name).
  CHECK_THROWS_AS(parsePipelineOrPreset("-O4", registry()), PipelineError);
}

TEST_CASE("passes are asked what they do: declared effects, also inside fixpoints") {
  Pipeline p = parsePipeline(
      "remove-dropout,bn-inference,fixpoint{max-iter=3}(fold-conv-bn,const-fold),channels-last,cast{dtype=bf16},"
      "quantize{dtype=int8},fuse-cudnn",
      registry());
  const auto lowers = [](const PassEffects& e) { return e.lowersPrecision; };
  CHECK(elementEffects(p.elements[4], registry()).lowersPrecision);
  CHECK(elementEffects(p.elements[3], registry()).changesLayout);
  CHECK(elementEffects(p.elements[6], registry()).needsDevice == "cuda");
  CHECK(elementEffects(p.elements[2].children[1], registry()).computesFromData);
  CHECK(elementEffects(p.elements[5], registry()).computesFromData);
  const PassEffects none = elementEffects(p.elements[2].children[0], registry());  // fold-conv-bn
  CHECK_FALSE((none.computesFromData || none.lowersPrecision || none.changesLayout || none.specializesTraining));
  CHECK(none.needsDevice.empty());

  CHECK(pipelineHas(p, registry(), lowers));
  CHECK(pipelineHas(p, registry(), [](const PassEffects& e) { return e.computesFromData; }));  // const-fold in a fixpoint
  CHECK(printPipeline(passesWhere(p, registry(), [](const PassEffects& e) { return e.specializesTraining; })) ==
        "remove-dropout,bn-inference");
  CHECK(dropPassesWhere(p, registry(), lowers) == std::vector<std::string>{"cast", "quantize"});
  CHECK_FALSE(pipelineHas(p, registry(), lowers));
  CHECK(dropPassesWhere(p, registry(), [](const PassEffects& e) { return e.computesFromData; }) ==
        std::vector<std::string>{"const-fold"});
  CHECK(printPipeline(p) ==
        "remove-dropout,bn-inference,fixpoint{max-iter=3}(fold-conv-bn),channels-last,fuse-cudnn");
}

TEST_CASE("typed element options read the pass's declared defaults and check what is set", "[pipeline]") {
  Pipeline p = parsePipeline("bn-to-affine{nodes=a},channels-last,fixpoint(cse)", registry());
  const PipelineElement& bn = p.elements[0];
  CHECK_FALSE(bn.boolOption("force"));  // the pass's default, not restated here
  CHECK(bn.stringOption("nodes") == "a");
  CHECK(p.elements[1].stringOption("mode") == "auto");
  CHECK(p.elements[2].intOption("max-iter") == kDefaultFixpointIterations);
  CHECK_THROWS_WITH(bn.boolOption("no-such"), Catch::Contains("declares no option 'no-such'"));
  CHECK_THROWS_WITH(bn.intOption("force"), Catch::Contains("not an int"));

  PipelineElement cl = p.elements[1];
  cl.setOption("mode", "on");
  CHECK(cl.stringOption("mode") == "on");
  CHECK_THROWS_WITH(cl.setOption("mode", "sideways"), Catch::Contains("option 'mode' of 'channels-last'"));
  CHECK_THROWS_WITH(cl.setOption("regoins", "x"), Catch::Contains("has no option 'regoins'"));
  PipelineElement forced = bn;
  forced.setOption("force", "1");
  CHECK(forced.boolOption("force"));
  CHECK(forced.option("force") == "true");  // stored canonical

  // Made in code: with elementOf / withOptionSpecs the same accessors work;
  // a bare element says how to get them.
  PipelineElement made = elementOf(registry(), "cast");
  CHECK(made.stringOption("dtype") == "auto");
  PipelineElement bare{"cast", {}, {}};
  CHECK_THROWS_WITH(bare.stringOption("dtype"), Catch::Contains("use elementOf"));
  CHECK(withOptionSpecs(bare, registry()).stringOption("dtype") == "auto");
  CHECK_THROWS_AS(elementOf(registry(), "no-such-pass"), std::invalid_argument);
}
