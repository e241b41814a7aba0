// The default pipeline (-O1) on every fixture: numerics within rtol 1e-4 /
// atol 1e-5, no BatchNorm left after a conv or linear, no dropout anywhere.
// The outputs are saved for the Python reload check (python.reload_o1).
#include "ir/op_views.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace ptopt;

namespace {

std::string o1Dir() { return test::exportedDir() + "_o1"; }

// BatchNorms whose input comes straight from a conv or linear.
size_t bnAfterConvOrLinear(const ir::Graph& g) {
  size_t count = 0;
  g.walk([&](ir::Node* n) {
    if (!n->is("aten::batch_norm")) return;
    const ir::Value* in = ir::BatchNormOp::match(n)->input();
    if (in && in->node() && (ir::ConvOp::match(in->node()) || ir::LinearOp::match(in->node()))) ++count;
  });
  return count;
}

}  // namespace

TEST_CASE("O1 keeps every fixture's numerics and removes foldable BatchNorms and all dropout") {
  std::filesystem::create_directories(o1Dir());
  for (const auto& f : test::allFixtures()) {
    DYNAMIC_SECTION(f.name) {
      Optimizer opt = Optimizer::load(f.path);
      rewriters::PassContext ctx;
      ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
      opt.run("-O1", &ctx);
      const ir::Graph& g = opt.model().forward();
      CHECK(test::countOps(g, "aten::dropout") + test::countOps(g, "aten::dropout_") +
                test::countOps(g, "aten::feature_dropout") == 0);
      if (f.name == "resnet18_script" || f.name == "resnet18_trace" || f.name == "mobilenet_v2_script" ||
          f.name == "deep_stack_500" || f.name == "linear_bn1d" || f.name == "train_mode_trace")
        CHECK(bnAfterConvOrLinear(g) == 0);
      if (f.name == "conv_reused_output") CHECK(bnAfterConvOrLinear(g) == 1);  // must not fold

      if (f.name == "train_mode_trace") {
        // Traced in training mode: -O1 must compute the same weights in eval
        // semantics (dropout off, BatchNorm on running statistics).
        torch::jit::Module reference = torch::jit::load(test::fixture("train_mode_eval_reference").path);
        reference.eval();
        torch::jit::Module optimized = opt.exportModule();
        auto inputs = verify::makeInputs(f.inputs, 3);
        auto cmp = verify::compareOutputs(test::runForward(optimized, inputs), test::runForward(reference, inputs),
                                          verify::Tolerance{1e-4, 1e-5});
        INFO(cmp.summary());
        CHECK(cmp.withinTolerance());
      } else {
        auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
        INFO(v.summary);
        CHECK(v.passed);
      }
      opt.save(o1Dir() + "/" + f.name + ".pt");
    }
  }
}
