// The generic passes of -O1 on every real fixture, with the edit-log check on
// (Instrumentation::checkEditLog): each pass makes all its edits through
// ir::Rewriter, the log's diff rebuilds the graph before it, and it reports
// `changed` exactly when it logged edits. Outputs stay within -O1's tolerance.
#include "rewriters/registry.h"
#include "tests/support/checked_run.h"

#include <catch2/catch.hpp>

#include <functional>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {

// -O1 with only the passes of rewriters/ (the folds live in fusion/ and are
// checked by their own tests).
Pipeline genericPartOfO1() {
  PassRegistry generic;
  registerGenericPasses(generic);
  std::function<std::vector<PipelineElement>(const std::vector<PipelineElement>&)> keep =
      [&](const std::vector<PipelineElement>& elements) {
        std::vector<PipelineElement> out;
        for (const PipelineElement& e : elements) {
          if (e.isFixpoint()) {
            PipelineElement f = e;
            f.children = keep(e.children);
            if (!f.children.empty()) out.push_back(std::move(f));
          } else if (generic.find(e.name)) {
            out.push_back(e);
          }
        }
        return out;
      };
  Pipeline p = parsePipelineOrPreset("-O1");
  p.elements = keep(p.elements);
  return p;
}

}  // namespace

TEST_CASE("the generic passes of -O1 log every edit on every fixture") {
  const Pipeline pipeline = genericPartOfO1();
  const std::string text = printPipeline(pipeline);
  INFO(text);
  CHECK(text == "canonicalize,remove-dropout,bn-inference,shape-prop,fixpoint{max-iter=4}(canonicalize,const-fold,cse,dce)");
  for (const auto& f : test::allFixtures()) {
    DYNAMIC_SECTION(f.name) {
      Optimizer opt = Optimizer::load(f.path);
      PassContext ctx;
      ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
      PassManager pm(defaultRegistry(), pipeline, test::checkedInstrumentation());
      RunReport report;
      REQUIRE_NOTHROW(report = pm.run(opt.model(), ctx));  // a PassError names the pass
      size_t edits = 0;
      for (const auto& e : report.executions) edits += e.edits;
      CHECK(edits == ctx.edits.size());
      CHECK(report.changed());  // shape-prop at least annotates
      if (f.stochastic || f.name == "train_mode_trace") continue;  // dropout removed on purpose
      auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 1);
      INFO(v.summary);
      CHECK(v.passed);
    }
  }
}

TEST_CASE("functionalize logs every edit on every fixture") {
  for (const auto& f : test::allFixtures()) {
    DYNAMIC_SECTION(f.name) {
      Optimizer opt = Optimizer::load(f.path);
      PassContext ctx;
      ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
      REQUIRE_NOTHROW(test::runChecked(opt.model(), "shape-prop,functionalize,dce", &ctx));
    }
  }
}

TEST_CASE("every preset logs every edit of every pass on every fixture") {
  for (const char* preset : {"-O1", "-O2", "-O3"}) {
    for (const auto& f : test::allFixtures()) {
      DYNAMIC_SECTION(preset << " " << f.name) {
        Optimizer opt = Optimizer::load(f.path);
        PassContext ctx;
        ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
        PassManager pm(defaultRegistry(), parsePipelineOrPreset(preset), test::checkedInstrumentation());
        RunReport report;
        REQUIRE_NOTHROW(report = pm.run(opt.model(), ctx));  // a PassError names the pass
        CHECK(test::loggedEdits(report) == ctx.edits.size());
        for (const auto& e : report.executions) CHECK(e.changed == (e.edits != 0));
      }
    }
  }
}
