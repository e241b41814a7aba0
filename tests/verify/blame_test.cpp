// Per-pass blame (verify/blame.h): with --verify-each the first pass
// execution that breaks tolerance is named; exact passes are not blamed.
#include "tests/support/fixtures.h"
#include "api/api.h"
#include "verify/blame.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace ptopt;

namespace {

// A rule that changes the math: relu_ becomes sigmoid_.
std::string badRules() {
  const auto path = std::filesystem::temp_directory_path() / "ptopt_blame_test_bad.rules";
  std::ofstream(path) << "rule relu-is-not-sigmoid\n"
                         "  pattern\n"
                         "    graph(%x : Tensor):\n"
                         "      %y : Tensor = aten::relu_(%x)\n"
                         "      output(%y)\n"
                         "  replacement\n"
                         "    graph(%x : Tensor):\n"
                         "      %y : Tensor = aten::sigmoid_(%x)\n"
                         "      output(%y)\n";
  return path.string();
}

struct Blamed {
  std::vector<verify::Blame> blames;
  std::vector<std::string> checkedAfter;  // executions that changed the model
  std::optional<std::string> blamed;
};

Blamed runWithBlame(const std::string& pipelineText) {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  const rewriters::Pipeline pipeline = parsePipelineOrPreset(pipelineText);
  verify::InputSource source;
  source.specs = f.inputs;
  source.iterations = 1;
  const c10::Device cpu(c10::kCPU);
  const verify::ReferenceRunner runner = opt.referenceRunner(opt.reference(pipeline, cpu), source, {}, cpu);
  verify::PassBlamer blamer(runner, [&opt] { return opt.exportModule(); });
  Blamed out;
  rewriters::Instrumentation inst;
  inst.onPassEnd = [&](const rewriters::PassExecution& e, const ir::Graph&) {
    if (e.changed) out.checkedAfter.push_back(e.pass);
    if (auto b = blamer.afterPass(e)) out.blames.push_back(std::move(*b));
  };
  opt.run(pipeline, nullptr, inst);
  out.blamed = blamer.blamed();
  return out;
}

}  // namespace

TEST_CASE("blame: the first pass execution that breaks tolerance is named, once") {
  const Blamed r = runWithBlame("canonicalize,rules{file=" + badRules() + "},fixpoint{max-iter=4}(cse,dce),rules{file=" +
                                badRules() + "}");
  REQUIRE(r.blames.size() == 1);  // later executions are not blamed again
  const verify::Blame& b = r.blames[0];
  CHECK(b.pass == "rules (execution 2, method forward)");
  CHECK_FALSE(b.report.passed);
  REQUIRE(r.blamed);
  CHECK(*r.blamed == b.pass);
  CHECK_THAT(b.message(), Catch::StartsWith("verify-each: pass 'rules (execution 2, method forward)' broke tolerance: "));
  CHECK_THAT(b.message(), Catch::Contains("worst"));  // the failing output's block
}

TEST_CASE("blame: exact passes are checked and not blamed (must not fire)") {
  const Blamed r = runWithBlame("-O1");
  CHECK_FALSE(r.checkedAfter.empty());  // -O1 changes resnet18, so each changing pass was checked
  CHECK(r.blames.empty());
  CHECK_FALSE(r.blamed);
}

TEST_CASE("blame: a BlameError thrown from onPassEnd stops the run at that pass") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::Instrumentation inst;
  size_t ran = 0;
  inst.onPassEnd = [&](const rewriters::PassExecution& e, const ir::Graph&) {
    ++ran;
    if (e.pass == "cse") throw verify::BlameError(verify::Blame{"cse (execution 2, method forward)", {}});
  };
  try {
    opt.run("canonicalize,cse,dce", nullptr, inst);
    FAIL("no BlameError");
  } catch (const verify::BlameError& e) {
    CHECK(std::string(e.what()) == "cse (execution 2, method forward)");
    CHECK(e.blame.pass == "cse (execution 2, method forward)");
  }
  CHECK(ran == 2);  // dce never ran
}
