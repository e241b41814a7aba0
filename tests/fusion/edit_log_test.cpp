// The fusion passes' edit logs are complete on every fixture: -O1's fusion
// part (the folding fixpoint, bn-to-affine forced on, fuse-add-relu) and,
// for a CUDA target, fuse-cudnn run with Instrumentation::checkEditLog, so
// that each pass's log must rebuild the graph's text before it and say
// `changed` exactly when the pass edited. The passes before them (canonicalize,
// remove-dropout, bn-inference, shape-prop) run unchecked.
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

#include <map>

using namespace ptopt;

namespace {

const char* kBefore = "canonicalize,remove-dropout,bn-inference,shape-prop";
const char* kFusion =
    "fixpoint{max-iter=8}(fold-conv-bn,fold-linear-bn,fold-conv-affine,drop-zero-bias),bn-to-affine{force=true},"
    "fuse-add-relu";

}  // namespace

TEST_CASE("The fusion passes log every edit they make on every fixture") {
  std::map<std::string, int64_t> fired;  // pass -> executions that changed a graph
  for (const auto& f : test::allFixtures()) {
    INFO(f.name);
    Optimizer opt = Optimizer::load(f.path);
    rewriters::PassContext ctx;
    ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
    opt.run(kBefore, &ctx);
    rewriters::RunReport report;
    REQUIRE_NOTHROW(report = opt.run(kFusion, &ctx, test::checkedInstrumentation()));
    for (const auto& e : report.executions) fired[e.pass] += e.changed;
    // Numerics against the original (train_mode_trace is compared with its
    // eval-mode reference in o1_test.cpp).
    if (f.name != "train_mode_trace") {
      auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
      INFO(v.summary);
      CHECK(v.passed);
    }
    // fuse-cudnn only rewrites for CUDA targets; its result runs on CUDA only.
    rewriters::PassContext cuda;
    cuda.targetDevice = "cuda";
    rewriters::RunReport fused;
    REQUIRE_NOTHROW(fused = opt.run("fuse-cudnn", &cuda, test::checkedInstrumentation()));
    for (const auto& e : fused.executions) fired[e.pass] += e.changed;
  }
  // The fixtures make these passes fire (the others fire on IR text in their own files).
  for (const char* pass : {"fold-conv-bn", "fold-linear-bn", "bn-to-affine", "fuse-add-relu", "fuse-cudnn"}) {
    INFO(pass);
    CHECK(fired[pass] > 0);
  }
}
