// onednn-blocked: conv regions run on oneDNN tensors with weights packed when
// the model loads (the export's load-time values); the saved file stores
// dense tensors, reloads, and recomputes the packed weights; named cases where
// it must not fire.
#include "ir/load_time.h"
#include "layout/onednn_blocked.h"
#include "tests/support/checked_run.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>
#include <torch/script.h>

#include <string>

using namespace ptopt;

namespace {

struct Prepared {
  Optimizer opt;
  rewriters::PassContext ctx;
};

Prepared prepared(const std::string& fixture, const std::string& pipeline) {
  const auto& f = test::fixture(fixture);
  Prepared p{Optimizer::load(f.path), {}};
  p.ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  p.opt.run(pipeline, &p.ctx);
  return p;
}

}  // namespace

TEST_CASE("onednn-blocked runs resnet18's conv region on oneDNN tensors, weights packed at load") {
  const auto& f = test::fixture("resnet18_script");
  Prepared p = prepared("resnet18_script", "-O2");
  const size_t convs = test::countOps(p.opt.model().forward(), "aten::conv2d");
  REQUIRE(convs == 20);
  auto report = p.opt.run("onednn-blocked", &p.ctx, test::checkedInstrumentation());
  REQUIRE(report.changed());
  CHECK(test::loggedEdits(report) > 0);
  CHECK(test::counter(report, "onednn-blocked", "regions") == 1);
  CHECK(test::counter(report, "onednn-blocked", "convs") == 20);
  CHECK(test::counter(report, "onednn-blocked", "entries") == 1);  // the image, once
  const ir::Graph& g = p.opt.model().forward();
  CHECK(test::countOps(g, "aten::conv2d") == 0);
  CHECK(test::countOps(g, "aten::mkldnn_convolution") == 20);
  CHECK(test::countOps(g, "aten::mkldnn_reorder_conv2d_weight") == 20);
  CHECK(test::countOps(g, "aten::to_mkldnn") == 21);  // 20 weights and the entry
  CHECK(test::countOps(g, "aten::to_dense") == test::counter(report, "onednn-blocked", "exits"));
  // The residual adds and relus run on oneDNN tensors too (no fused _add_relu there).
  CHECK(test::countOps(g, "aten::_add_relu") == 0);

  auto v = p.opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);

  // Saved: the reorders moved into the holder's __setstate__, the file keeps
  // dense weights, and loading computes the packed ones again.
  Optimizer::Serialized s = p.opt.serialize();
  const std::string forward = s.module.get_method("forward").graph()->toString();
  CHECK_THAT(forward, !Catch::Contains("mkldnn_reorder_conv2d_weight"));
  CHECK_THAT(forward, Catch::Contains("aten::mkldnn_convolution"));
  const torch::jit::Module holder = s.module.attr(ir::kLoadTimeModule).toModule();
  CHECK(holder.find_method("__setstate__"));
  CHECK(holder.attr("v0").toTensor().is_mkldnn());  // recomputed by the load
  CHECK_FALSE(holder.attr("s0").toTensor().is_mkldnn());
  // The reloaded module computes what the original does.
  auto inputs = verify::makeInputs(f.inputs, 3);
  torch::NoGradGuard noGrad;
  const at::Tensor expected = p.opt.original().forward(inputs).toTensor();
  const at::Tensor got = s.module.forward(inputs).toTensor();
  CHECK(at::allclose(got, expected, 1e-4, 1e-4));

  // Imported again, the regions come back dense (the convs read the dense
  // weights the holder stores), so every pass applies; onednn-blocked packs
  // them again.
  Optimizer again = Optimizer::fromModule(s.module);
  CHECK(test::countOps(again.model().forward(), "aten::mkldnn_reorder_conv2d_weight") == 0);
  CHECK(test::countOps(again.model().forward(), "aten::to_mkldnn") == 0);
  CHECK(test::countOps(again.model().forward(), "aten::to_dense") == 0);
  CHECK(test::countOps(again.model().forward(), "aten::mkldnn_convolution") == 20);
  rewriters::PassContext ctx;
  ctx.exampleInputs = inputs;
  again.run("-O1,onednn-blocked", &ctx, test::checkedInstrumentation());
  CHECK(test::countOps(again.model().forward(), "aten::mkldnn_reorder_conv2d_weight") == 20);
  Optimizer::Serialized twice = again.serialize();
  CHECK(twice.module.attr(ir::kLoadTimeModule).toModule().attr("v0").toTensor().is_mkldnn());
  CHECK(at::allclose(twice.module.forward(inputs).toTensor(), expected, 1e-4, 1e-4));
}

TEST_CASE("const-fold leaves load-time values to the export") {
  Prepared p = prepared("resnet18_script", "-O2,onednn-blocked");
  auto report = p.opt.run("const-fold", &p.ctx, test::checkedInstrumentation());
  CHECK(test::countOps(p.opt.model().forward(), "aten::mkldnn_reorder_conv2d_weight") == 20);
  bool explained = false;
  for (const auto& d : p.ctx.declines()) explained = explained || d.find("a TorchScript file cannot store") != std::string::npos;
  CHECK(explained);
  CHECK_NOTHROW(p.opt.serialize());
}

TEST_CASE("OneDnnBlockedDoesNotFireForACudaTargetWithoutShapesOrOnSmallRegions") {
  SECTION("a CUDA target") {
    Prepared p = prepared("resnet18_script", "canonicalize,shape-prop,fold-conv-bn");
    p.ctx.targetDevice = "cuda";
    CHECK_FALSE(p.opt.run("onednn-blocked", &p.ctx, test::checkedInstrumentation()).changed());
    CHECK_THAT(p.ctx.declines().back(), Catch::Contains("oneDNN tensors are CPU tensors"));
  }
  SECTION("without shapes") {
    const auto& f = test::fixture("resnet18_script");
    Optimizer opt = Optimizer::load(f.path);
    rewriters::PassContext ctx;  // no example inputs: shape-prop records nothing
    opt.run("canonicalize,shape-prop", &ctx);
    CHECK_FALSE(opt.run("onednn-blocked", &ctx, test::checkedInstrumentation()).changed());
    REQUIRE_FALSE(ctx.declines().empty());
    CHECK_THAT(ctx.declines().back(), Catch::Contains("run shape-prop"));
  }
  SECTION("regions under min-convs") {
    Prepared p = prepared("resnet18_script", "-O2");
    CHECK_FALSE(p.opt.run("onednn-blocked{min-convs=21}", &p.ctx, test::checkedInstrumentation()).changed());
    CHECK_THAT(p.ctx.declines().back(), Catch::Contains("a region of 20 convs (min-convs=21)"));
  }
}

TEST_CASE("OneDnnBlockedDoesNotFireWhereAConvResultIsWrittenInPlaceAndReadElsewhere") {
  // y = conv(x); y.relu_(); z = conv2(y); z.add_(y); ...: the members would
  // read a oneDNN value that the in-place writes no longer match.
  const auto& f = test::fixture("inplace_ops");
  Prepared p = prepared("inplace_ops", "canonicalize,shape-prop");
  auto report = p.opt.run("onednn-blocked{min-convs=1}", &p.ctx, test::checkedInstrumentation());
  CHECK(test::countOps(p.opt.model().forward(), "aten::mkldnn_reorder_conv2d_weight") == 0);
  bool explained = false;
  for (const auto& d : p.ctx.declines()) explained = explained || d.find("written in place") != std::string::npos;
  CHECK(explained);
  auto v = p.opt.verify(f.inputs, {1e-5, 1e-6}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("onednn-blocked stops a region at ops oneDNN tensors lack (mobilenet_v2's relu6)") {
  const auto& f = test::fixture("mobilenet_v2_script");
  Prepared p = prepared("mobilenet_v2_script", "-O2");
  const size_t hardtanh = test::countOps(p.opt.model().forward(), "aten::hardtanh") +
                          test::countOps(p.opt.model().forward(), "aten::hardtanh_");
  REQUIRE(hardtanh > 0);
  p.opt.run("onednn-blocked{min-convs=1}", &p.ctx, test::checkedInstrumentation());
  // relu6 stays dense: every one reads a to_dense (or a dense value).
  p.opt.model().forward().walk([&](ir::Node* n) {
    if (!n->is("aten::hardtanh") && !n->is("aten::hardtanh_")) return;
    const ir::Node* producer = n->arg(0).value()->node();
    CHECK((!producer || !producer->is("aten::mkldnn_convolution")));
  });
  auto v = p.opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  CHECK_NOTHROW(p.opt.serialize());
}

TEST_CASE("onednn-blocked keeps silu in the region as x * sigmoid(x), and the import reads it back as silu") {
  torch::jit::Module m("SiluBlock");
  m.register_attribute("training", c10::BoolType::get(), false);
  for (int i = 0; i < 2; ++i) {
    m.register_parameter("w" + std::to_string(i), at::randn({8, 8, 3, 3}) * 0.3, false);
    m.register_parameter("b" + std::to_string(i), at::randn({8}), false);
  }
  m.define(R"(
def forward(self, x):
    y = torch.silu(torch.conv2d(x, self.w0, self.b0, [1, 1], [1, 1], [1, 1], 1))
    z = torch.conv2d(y, self.w1, self.b1, [1, 1], [1, 1], [1, 1], 1)
    return torch.silu(z) + y
)");
  Optimizer opt = Optimizer::fromModule(m);
  verify::InputSpec input;
  input.shape = {1, 8, 10, 10};
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs({input}, 0);
  opt.run("canonicalize,shape-prop", &ctx);
  auto report = opt.run("onednn-blocked", &ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "onednn-blocked", "regions") == 1);
  CHECK(test::counter(report, "onednn-blocked", "convs") == 2);
  CHECK(test::counter(report, "onednn-blocked", "exits") == 1);  // the sum, once, at the output
  const ir::Graph& g = opt.model().forward();
  CHECK(test::countOps(g, "aten::silu") == 0);
  CHECK(test::countOps(g, "aten::sigmoid") == 2);
  CHECK(test::countOps(g, "aten::mul") == 2);
  auto v = opt.verify({input}, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
  Optimizer::Serialized s = opt.serialize();
  torch::NoGradGuard noGrad;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1, 8, 10, 10}, std::vector<int64_t>{2, 8, 7, 13}}) {
    const at::Tensor x = at::randn(shape);
    CHECK(at::allclose(s.module.forward({x}).toTensor(), opt.original().forward({x}).toTensor(), 1e-4, 1e-4));
  }
  Optimizer again = Optimizer::fromModule(s.module);
  CHECK(test::countOps(again.model().forward(), "aten::silu") == 2);
  CHECK(test::countOps(again.model().forward(), "aten::sigmoid") == 0);
  CHECK(test::countOps(again.model().forward(), "aten::mkldnn_convolution") == 2);
}

TEST_CASE("onednn-blocked converts only the regions named in regions=") {
  const auto& f = test::fixture("mobilenet_v2_script");
  Prepared p = prepared("mobilenet_v2_script", "-O2");
  const auto regions = layout::oneDnnBlockedRegions(p.opt.model().forward(), 2);
  REQUIRE(regions.size() > 2);  // relu6 ends a region at every activation
  for (const auto& r : regions) CHECK(r.convs >= 2);
  const std::string pick = regions[1].id;
  auto report = p.opt.run("onednn-blocked{regions=\"" + pick + "\"}", &p.ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "onednn-blocked", "regions") == 1);
  CHECK(test::counter(report, "onednn-blocked", "convs") == static_cast<int64_t>(regions[1].convs));
  CHECK(test::declinedWith(p.ctx, "not named in regions="));
  auto v = p.opt.verify(f.inputs, {1e-4, 1e-5}, 1);
  INFO(v.summary);
  CHECK(v.passed);
}

TEST_CASE("onednn-blocked leaves adaptive pooling to sizes other than 1x1 dense") {
  const auto& f = test::fixture("adaptive_pool3");
  Prepared p = prepared("adaptive_pool3", "-O1");
  auto report = p.opt.run("onednn-blocked", &p.ctx, test::checkedInstrumentation());
  CHECK(test::counter(report, "onednn-blocked", "convs") == 2);
  // The pool to 3x3 of a 4x4 map reads the region's dense exit: on oneDNN
  // tensors it fails ("input size is not divisible by the output size").
  bool seen = false;
  p.opt.model().forward().walk([&](ir::Node* n) {
    if (!n->is("aten::adaptive_avg_pool2d")) return;
    seen = true;
    const ir::Node* producer = n->arg(0).value()->node();
    CHECK((producer && producer->is("aten::to_dense")));
  });
  CHECK(seen);
  auto v = p.opt.verify(f.inputs, {1e-4, 1e-5}, 2);
  INFO(v.summary);
  CHECK(v.passed);
}
