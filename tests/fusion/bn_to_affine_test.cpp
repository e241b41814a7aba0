// bn-to-affine: declines on CPU by default; with force=true an unfoldable
// BatchNorm becomes addcmul: structure, numerics, and where it must not fire.
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

using namespace ptopt;

TEST_CASE("bn-to-affine declines by default and converts with force") {
  const auto& f = test::fixture("bn_after_cat");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  auto report = opt.run("bn-to-affine", &ctx);
  CHECK_FALSE(report.changed());
  CHECK_THAT(ctx.declines().at(0), Catch::Contains("batch_norm is faster"));

  rewriters::PassContext withShapes;
  withShapes.exampleInputs = verify::makeInputs(f.inputs, 0);
  auto forced = opt.run("canonicalize,shape-prop,bn-to-affine{force=true},dce", &withShapes);
  CHECK(test::counter(forced, "bn-to-affine", "converted") == 1);
  CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 0);
  CHECK(test::countOps(opt.model().forward(), "aten::addcmul") == 1);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("bn-to-affine{force=true} logs every edit it makes") {
  const auto& f = test::fixture("bn_after_cat");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("canonicalize,shape-prop", &ctx);
  auto report = opt.run("bn-to-affine{force=true}", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "bn-to-affine", "converted") == 1);
  CHECK(test::loggedEdits(report) > 0);
  test::checkIR(opt.model().forward().str(), R"(
    # CHECK: .affine_scale"]
    # CHECK: .affine_shift"]
    # CHECK: aten::addcmul(
    # CHECK-NOT: aten::batch_norm
  )");
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("BnToAffineDoesNotFireWithoutTheInputRank") {
  const auto& f = test::fixture("bn_after_cat");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;  // no example inputs: shape-prop knows nothing
  opt.run("canonicalize", &ctx);
  auto report = opt.run("bn-to-affine{force=true}", &ctx, test::checkedInstrumentation());
  CHECK_FALSE(report.changed());
  CHECK(test::countOps(opt.model().forward(), "aten::batch_norm") == 1);
  REQUIRE_FALSE(ctx.declines().empty());
  CHECK_THAT(ctx.declines().back(), Catch::Contains("input rank is unknown"));
}
