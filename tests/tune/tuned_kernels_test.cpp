// tuned-kernels: the named convs become aten::mkldnn_convolution with the
// arguments in its order (padding before stride); numerics equal the
// original's; every edit is logged; named must-not-fire cases.
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"
#include "tune/tuned_kernels.h"

#include <catch2/catch.hpp>

using namespace ptopt;

namespace {

std::vector<std::string> convNames(const ir::Graph& g) {
  std::vector<std::string> names;
  g.walk([&](ir::Node* n) {
    if (n->is("aten::conv2d")) names.push_back(n->output()->name());
  });
  return names;
}

}  // namespace

TEST_CASE("tuned-kernels rewrites the named convs to mkldnn_convolution") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("canonicalize,shape-prop,fold-conv-bn", &ctx);
  const std::vector<std::string> convs = convNames(opt.model().forward());
  REQUIRE(convs.size() == 20);
  // The first three (the stem is 7x7 with stride 2) and the last.
  std::set<std::string> chosen{convs[0], convs[1], convs[2], convs.back()};
  REQUIRE(chosen.size() == 4);
  const size_t before = test::countOps(opt.model().forward(), "aten::conv2d");
  auto report = opt.run("tuned-kernels{mkldnn=\"" + tune::joinNameList(chosen) + "\"}", &ctx, test::checkedInstrumentation());
  CHECK(report.changed());
  CHECK(test::counter(report, "tuned-kernels", "mkldnn") == 4);
  CHECK(test::loggedEdits(report) > 0);
  CHECK(test::countOps(opt.model().forward(), "aten::mkldnn_convolution") == 4);
  CHECK(test::countOps(opt.model().forward(), "aten::conv2d") == before - 4);
  // The stem conv: stride 2, padding 3 -> mkldnn_convolution(x, w, b, padding, stride, dilation, groups).
  test::checkIR(opt.model().forward().str(), R"(
    # CHECK: aten::mkldnn_convolution(
    # CHECK-SAME: [3, 3], [2, 2], [1, 1], 1)
  )");
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  // It saves and loads back (the Python reload is in tests/cli/tune_test.sh).
  CHECK_NOTHROW(opt.serialize());
}

TEST_CASE("tuned-kernels keeps channels-last convs channels-last") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O2", &ctx);
  const std::vector<std::string> convs = convNames(opt.model().forward());
  REQUIRE_FALSE(convs.empty());
  std::set<std::string> all(convs.begin(), convs.end());
  auto report = opt.run("tuned-kernels{mkldnn=\"" + tune::joinNameList(all) + "\"}", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "tuned-kernels", "mkldnn") == static_cast<int64_t>(convs.size()));
  CHECK(test::countOps(opt.model().forward(), "aten::conv2d") == 0);
  auto v = opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("TunedKernelsDoesNotFireWithoutShapes") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;  // no example inputs: shape-prop records nothing
  opt.run("canonicalize,shape-prop", &ctx);
  const std::vector<std::string> convs = convNames(opt.model().forward());
  auto report = opt.run("tuned-kernels{mkldnn=" + convs.at(0) + "}", &ctx, test::checkedInstrumentation());
  CHECK_FALSE(report.changed());
  REQUIRE_FALSE(ctx.declines().empty());
  CHECK_THAT(ctx.declines().back(), Catch::Contains("not known to be a 4-D tensor"));
}

TEST_CASE("TunedKernelsDoesNotFireForACudaTargetOrUnnamedConvs") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("canonicalize,shape-prop", &ctx);
  const std::vector<std::string> convs = convNames(opt.model().forward());
  // No names: nothing to do.
  CHECK_FALSE(opt.run("tuned-kernels", &ctx, test::checkedInstrumentation()).changed());
  // A name that matches nothing (another method's) is ignored.
  CHECK_FALSE(opt.run("tuned-kernels{mkldnn=no_such_value}", &ctx, test::checkedInstrumentation()).changed());
  ctx.targetDevice = "cuda";
  CHECK_FALSE(opt.run("tuned-kernels{mkldnn=" + convs.at(0) + "}", &ctx, test::checkedInstrumentation()).changed());
  CHECK_THAT(ctx.declines().back(), Catch::Contains("CPU kernels"));
  CHECK(test::countOps(opt.model().forward(), "aten::mkldnn_convolution") == 0);
}

TEST_CASE("the conv's name list parses and prints back sorted") {
  CHECK(tune::parseNameList("b; a;;c") == std::set<std::string>{"a", "b", "c"});
  CHECK(tune::joinNameList({"b", "a"}) == "a;b");
  CHECK(tune::parseNameList("").empty());
}
