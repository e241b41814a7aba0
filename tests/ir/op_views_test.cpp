// Op views (ir/op_views.h): named arguments of conv, batch_norm, linear,
// dropout, to and layout ops, read through the node's schema or, for nodes
// without one, through the family's table. Graphs come from the IR text
// parser and from a scripted TorchScript module.
#include "ir/model.h"
#include "ir/op_views.h"
#include "ir/text.h"

#include <catch2/catch.hpp>
#include <torch/script.h>

using namespace ptopt;
using namespace ptopt::ir;

namespace {

// The node that defines %name.
Node* def(Graph& g, const std::string& name) {
  Value* v = g.findValue(name);
  REQUIRE(v != nullptr);
  return v->node();
}

const char* kConvs =
    "graph(%x : Tensor, %g : int):\n"
    "  %w : Tensor = get_attr[\"w\"]\n"
    "  %b : Tensor = get_attr[\"b\"]\n"
    "  %c2 : Tensor = aten::conv2d(%x, %w, %b, [2, 2], [1, 1], [1, 1], 4)\n"
    "  %ct : Tensor = aten::conv_transpose2d.input(%x, %w, None, [1, 1], [0, 0], [1, 1], 2, [3, 3])\n"
    "  %cu : Tensor = aten::_convolution(%x, %w, %b, [1, 1], [0, 0], [1, 1], True, [0, 0], 3, False, False, True, True)\n"
    "  %cf : Tensor = aten::_convolution(%x, %w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, False, False, True, True)\n"
    "  %cg : Tensor = aten::conv2d(%x, %w, %b, [1, 1], [0, 0], [1, 1], %g)\n"
    "  %r : Tensor = aten::relu(%c2)\n"
    "  output(%r)\n";

}  // namespace

TEST_CASE("ConvOp reads conv2d's arguments by name") {
  auto g = parseGraph(kConvs);
  auto conv = ConvOp::match(def(*g, "c2"));
  REQUIRE(conv);
  CHECK_FALSE(conv->transposed());
  CHECK(conv->groups() == 4);
  CHECK(conv->input() == g->findValue("x"));
  CHECK(conv->weight() == g->findValue("w"));
  CHECK(conv->bias() == g->findValue("b"));
  CHECK(conv->weightIndex() == 1);
  CHECK(conv->biasIndex() == 2);
  CHECK(conv->stride() == std::vector<int64_t>{2, 2});
  CHECK(conv->padding() == std::vector<int64_t>{1, 1});
  CHECK(conv->dilation() == std::vector<int64_t>{1, 1});
  CHECK(conv->index("groups") == 6);
  CHECK_FALSE(conv->isUnified());
  CHECK(conv->spatialDimsFromName() == 2);
}

TEST_CASE("ConvOp reads conv_transpose2d's groups before its dilation") {
  auto g = parseGraph(kConvs);
  auto conv = ConvOp::match(def(*g, "ct"));
  REQUIRE(conv);
  CHECK(conv->transposed());
  CHECK(conv->groups() == 2);
  CHECK(conv->index("groups") == 6);
  CHECK(conv->dilation() == std::vector<int64_t>{3, 3});
  CHECK(conv->index("dilation") == 7);
  CHECK(conv->bias() == nullptr);
  CHECK(conv->isNone("bias"));
}

TEST_CASE("ConvOp reads _convolution's groups at argument 8, not transposed at 6") {
  auto g = parseGraph(kConvs);
  auto transposed = ConvOp::match(def(*g, "cu"));
  REQUIRE(transposed);
  CHECK(transposed->isUnified());
  CHECK(transposed->index("transposed") == 6);
  CHECK(transposed->index("groups") == 8);
  CHECK(transposed->transposed());
  CHECK(transposed->groups() == 3);
  CHECK_FALSE(transposed->spatialDimsFromName());

  // transposed=False, groups=1: reading argument 6 as groups would say 0.
  auto plain = ConvOp::match(def(*g, "cf"));
  REQUIRE(plain);
  CHECK_FALSE(plain->transposed());
  CHECK(plain->groups() == 1);
}

TEST_CASE("ConvOpDoesNotMatchAConvWithNonLiteralGroups") {
  auto g = parseGraph(kConvs);
  Node* conv = def(*g, "cg");
  CHECK(ConvOp::isConv(conv));
  CHECK_FALSE(ConvOp::match(conv));
  // The generic view still names the argument.
  CHECK(OpView::of(conv).value("groups") == g->findValue("g"));
  CHECK_FALSE(OpView::of(conv).intArg("groups"));
  // Not a conv at all.
  CHECK_FALSE(ConvOp::isConv(def(*g, "r")));
  CHECK_FALSE(ConvOp::match(def(*g, "r")));
}

TEST_CASE("ConvOp on a scripted module's _convolution and conv_transpose2d") {
  torch::jit::Module m("Convs");
  m.register_attribute("w", c10::TensorType::get(), torch::randn({4, 2, 3, 3}));
  m.register_attribute("b", c10::TensorType::get(), torch::randn({4}));
  m.define(R"(
def forward(self, x):
    y = torch._convolution(x, self.w, self.b, [1, 1], [1, 1], [1, 1], False, [0, 0], 2, False, False, True, True)
    z = torch.conv_transpose2d(y, self.w, None, 1, 0, 0, 2, 1)
    return z
)");
  Model model = importModule(m);
  std::vector<ConvOp> convs;
  model.forward().walk([&](Node* n) {
    if (auto conv = ConvOp::match(n)) convs.push_back(*conv);
  });
  REQUIRE(convs.size() == 2);
  CHECK(convs[0].target() == "aten::_convolution");
  CHECK_FALSE(convs[0].transposed());
  CHECK(convs[0].groups() == 2);
  CHECK(convs[0].weight() != nullptr);
  CHECK(convs[0].bias() != nullptr);
  CHECK(convs[1].target() == "aten::conv_transpose2d");
  CHECK(convs[1].transposed());
  CHECK(convs[1].groups() == 2);
  CHECK(convs[1].input() == convs[0].node()->output());
  CHECK(convs[1].bias() == nullptr);
}

TEST_CASE("BatchNormOp, LinearOp, DropoutOp, ToOp and LayoutOp name their arguments") {
  auto g = parseGraph(
      "graph(%x : Tensor, %t : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %m : Tensor = get_attr[\"m\"]\n"
      "  %v : Tensor = get_attr[\"v\"]\n"
      "  %bn : Tensor = aten::batch_norm(%x, None, %w, %m, %v, False, 0.1, 1e-05, True)\n"
      "  %fc : Tensor = aten::linear(%bn, %w, None)\n"
      "  %d : Tensor = aten::dropout(%fc, 0.25, False)\n"
      "  %d2 : Tensor = aten::feature_alpha_dropout_(%d, 0.5, True)\n"
      "  %h : Tensor = aten::to.dtype(%d2, torch.float16, False, True, torch.channels_last)\n"
      "  %o : Tensor = aten::to.other(%h, %t, False, False, None)\n"
      "  %ta : Tensor = aten::type_as(%o, %t)\n"
      "  %c : Tensor = aten::contiguous(%ta, torch.channels_last)\n"
      "  %p : Tensor = aten::permute(%c, [0, 2, 3, 1])\n"
      "  %f : Tensor = aten::flatten.using_ints(%p, 1, -1)\n"
      "  %r : Tensor = aten::reshape(%f, [-1])\n"
      "  %tr : Tensor = aten::transpose.int(%p, 1, 2)\n"
      "  %tu : Tuple[Tensor, Tensor] = prim::TupleConstruct(%r, %tr)\n"
      "  output(%tu)\n");

  auto bn = BatchNormOp::match(def(*g, "bn"));
  REQUIRE(bn);
  CHECK(bn->input() == g->findValue("x"));
  CHECK(bn->weight() == nullptr);  // None
  CHECK(bn->bias() == g->findValue("w"));
  CHECK(bn->runningMean() == g->findValue("m"));
  CHECK(bn->runningVar() == g->findValue("v"));
  CHECK(bn->training() == false);
  REQUIRE(bn->momentum());
  CHECK(*bn->momentum() == Approx(0.1));
  REQUIRE(bn->eps());
  CHECK(*bn->eps() == Approx(1e-5));
  CHECK_FALSE(BatchNormOp::match(def(*g, "fc")));

  auto fc = LinearOp::match(def(*g, "fc"));
  REQUIRE(fc);
  CHECK(fc->input() == g->findValue("bn"));
  CHECK(fc->weight() == g->findValue("w"));
  CHECK(fc->bias() == nullptr);
  CHECK(fc->weightIndex() == 1);
  CHECK(fc->biasIndex() == 2);

  auto d = DropoutOp::match(def(*g, "d"));
  REQUIRE(d);
  CHECK(d->input() == g->findValue("fc"));
  REQUIRE(d->p());
  CHECK(*d->p() == Approx(0.25));
  CHECK(d->train() == false);
  CHECK_FALSE(d->inPlace());
  auto d2 = DropoutOp::match(def(*g, "d2"));
  REQUIRE(d2);
  CHECK(d2->inPlace());
  CHECK(d2->train() == true);

  auto h = ToOp::match(def(*g, "h"));
  REQUIRE(h);
  CHECK(h->self() == g->findValue("d2"));
  CHECK(h->dtype() == c10::ScalarType::Half);
  CHECK(h->copy() == true);
  CHECK(h->memoryFormat() == c10::MemoryFormat::ChannelsLast);
  CHECK(h->other() == nullptr);
  CHECK_FALSE(h->hasDevice());
  auto o = ToOp::match(def(*g, "o"));
  REQUIRE(o);
  CHECK(o->other() == g->findValue("t"));
  CHECK_FALSE(o->dtype());
  auto ta = ToOp::match(def(*g, "ta"));
  REQUIRE(ta);
  CHECK(ta->self() == g->findValue("o"));
  CHECK(ta->other() == g->findValue("t"));

  auto c = LayoutOp::match(def(*g, "c"));
  REQUIRE(c);
  CHECK(c->self() == g->findValue("ta"));
  CHECK(c->memoryFormat() == c10::MemoryFormat::ChannelsLast);
  auto p = LayoutOp::match(def(*g, "p"));
  REQUIRE(p);
  CHECK(p->dims() == std::vector<int64_t>{0, 2, 3, 1});
  auto f = LayoutOp::match(def(*g, "f"));
  REQUIRE(f);
  CHECK(f->startDim() == 1);
  CHECK(f->endDim() == -1);
  auto r = LayoutOp::match(def(*g, "r"));
  REQUIRE(r);
  REQUIRE(r->size() != nullptr);
  CHECK(r->size()->literal().as<std::vector<int64_t>>() == std::vector<int64_t>{-1});
  auto tr = LayoutOp::match(def(*g, "tr"));
  REQUIRE(tr);
  CHECK(tr->dim0() == 1);
  CHECK(tr->dim1() == 2);
  CHECK_FALSE(LayoutOp::match(def(*g, "bn")));
}

TEST_CASE("OpView names any op's arguments through its schema and throws on an unknown name") {
  auto g = parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %s : Tensor = aten::add.Tensor(%x, %y, 2)\n"
      "  output(%s)\n");
  const OpView add = OpView::of(def(*g, "s"));
  CHECK(add.value("self") == g->findValue("x"));
  CHECK(add.value("other") == g->findValue("y"));
  CHECK(add.intArg("alpha") == 2);
  REQUIRE(add.floatArg("alpha"));  // ints widen
  CHECK(*add.floatArg("alpha") == Approx(2.0));
  CHECK(add.index("alpha") == 2);
  CHECK_FALSE(add.has("beta"));
  CHECK_FALSE(add.indexOf("beta"));
  CHECK(add.value("beta") == nullptr);
  CHECK_THROWS_WITH(add.index("beta"), Catch::Contains("aten::add.Tensor has no argument 'beta'"));
}

TEST_CASE("A node without schema is read through the family's table") {
  auto g = parseGraph(kConvs);
  Node* n = def(*g, "ct");
  n->setSchema(nullptr);  // as for nodes built without a schema
  // The generic view knows nothing without a schema...
  CHECK_FALSE(OpView::of(n).has("groups"));
  // ...the conv view falls back on conv_transpose's argument order.
  auto conv = ConvOp::match(n);
  REQUIRE(conv);
  CHECK(conv->transposed());
  CHECK(conv->groups() == 2);
  CHECK(conv->index("dilation") == 7);
  CHECK(conv->dilation() == std::vector<int64_t>{3, 3});

  Node* unified = def(*g, "cu");
  unified->setSchema(nullptr);
  auto u = ConvOp::match(unified);
  REQUIRE(u);
  CHECK(u->index("groups") == 8);
  CHECK(u->groups() == 3);
  CHECK(u->transposed());

  // An overload the parser does not know: no schema, the batch_norm table.
  ParseOptions lenient;
  lenient.requireKnownOperators = false;
  auto g2 = parseGraph(
      "graph(%x : Tensor, %m : Tensor, %v : Tensor):\n"
      "  %bn : Tensor = aten::batch_norm.custom(%x, None, None, %m, %v, True, 0.1, 0.001, False)\n"
      "  output(%bn)\n",
      lenient);
  Node* node = def(*g2, "bn");
  REQUIRE(node->schema() == nullptr);
  auto bn = BatchNormOp::match(node);
  REQUIRE(bn);
  CHECK(bn->runningVar() == g2->findValue("v"));
  CHECK(bn->training() == true);
  REQUIRE(bn->eps());
  CHECK(*bn->eps() == Approx(0.001));
  // Arguments past the node's end read as absent.
  auto g3 = parseGraph(
      "graph(%x : Tensor, %w : Tensor):\n"
      "  %y : Tensor = aten::linear.short(%x, %w)\n"
      "  output(%y)\n",
      lenient);
  auto fc = LinearOp::match(def(*g3, "y"));
  REQUIRE(fc);
  CHECK(fc->weight() == g3->findValue("w"));
  CHECK_FALSE(fc->has("bias"));
  CHECK(fc->isNone("bias"));
  CHECK(fc->bias() == nullptr);
}

TEST_CASE("Conv2dKernelOp reads conv2d and mkldnn_convolution by name and writes either order") {
  auto g = parseGraph(
      "graph(%x : Tensor, %g : int):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %c2 : Tensor = aten::conv2d(%x, %w, None, [2, 2], [1, 1], [1, 1], 4)\n"
      "  %mk : Tensor = aten::mkldnn_convolution(%x, %w, None, [3, 3], [5, 5], [1, 1], 2)\n"
      "  %cg : Tensor = aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], %g)\n"
      "  %short : Tensor = aten::conv2d(%x, %w)\n"
      "  output(%c2)\n");
  auto c2 = Conv2dKernelOp::match(def(*g, "c2"));
  REQUIRE(c2);
  CHECK_FALSE(c2->isMkldnn());
  CHECK(c2->input().value() == g->findValue("x"));
  CHECK(c2->stride().literal().as<std::vector<int64_t>>() == std::vector<int64_t>{2, 2});
  CHECK(c2->padding().literal().as<std::vector<int64_t>>() == std::vector<int64_t>{1, 1});
  CHECK(c2->hasLiteralGeometry());
  // conv2d (stride 3, padding 4) -> mkldnn_convolution (padding, stride) and prepack (stride, padding)
  CHECK(c2->mkldnnConvolutionOrder() == std::vector<size_t>{0, 1, 2, 4, 3, 5, 6});
  CHECK(c2->prepackOrder() == std::vector<size_t>{1, 2, 3, 4, 5, 6});
  const std::vector<Arg> mkArgs = c2->mkldnnConvolutionArgs(Arg(g->findValue("g")));
  CHECK(mkArgs[0].value() == g->findValue("g"));
  CHECK(mkArgs[3].literal().as<std::vector<int64_t>>() == std::vector<int64_t>{1, 1});  // padding
  CHECK(mkArgs[4].literal().as<std::vector<int64_t>>() == std::vector<int64_t>{2, 2});  // stride
  CHECK(c2->reorderGeometry()[0].literal().as<std::vector<int64_t>>() == std::vector<int64_t>{1, 1});

  auto mk = Conv2dKernelOp::match(def(*g, "mk"));
  REQUIRE(mk);
  CHECK(mk->isMkldnn());
  CHECK(mk->input().value() == g->findValue("x"));
  CHECK(mk->stride().literal().as<std::vector<int64_t>>() == std::vector<int64_t>{5, 5});
  CHECK(mk->padding().literal().as<std::vector<int64_t>>() == std::vector<int64_t>{3, 3});
  CHECK(mk->mkldnnConvolutionOrder() == std::vector<size_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(mk->prepackOrder() == std::vector<size_t>{1, 2, 4, 3, 5, 6});

  auto cg = Conv2dKernelOp::match(def(*g, "cg"));
  REQUIRE(cg);
  CHECK_FALSE(cg->hasLiteralGeometry());  // groups computed
  CHECK_FALSE(Conv2dKernelOp::match(def(*g, "short")));  // defaulted arguments
}

TEST_CASE("ConvPrepackOp, AddOp, CatOp and ClampOp read their arguments by name") {
  auto g = parseGraph(
      "graph(%x : Tensor, %y : Tensor, %a : int, %lo : float):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %p : Any = mkldnn_prepacked::conv2d_prepack(%w, None, [1, 1], [2, 2], [1, 1], 1, [1, 3, 8, 8], \"none\")\n"
      "  %s1 : Tensor = aten::add.Tensor(%x, %y, 1)\n"
      "  %s2 : Tensor = aten::add_.Tensor(%x, %y, 2)\n"
      "  %s3 : Tensor = aten::add.Tensor(%x, %y, %a)\n"
      "  %s4 : Tensor = aten::_add_relu.Tensor(%x, %y, 1)\n"
      "  %s5 : Tensor = aten::add.Scalar(%x, 2, 1)\n"
      "  %l : List[Tensor] = prim::ListConstruct(%x, %y)\n"
      "  %c : Tensor = aten::cat(%l, 1)\n"
      "  %h : Tensor = aten::hardtanh(%x, 0., 6.)\n"
      "  %h2 : Tensor = aten::hardtanh_(%x)\n"
      "  %k : Tensor = aten::clamp(%x, 0., 6.)\n"
      "  %k2 : Tensor = aten::clamp(%x, %lo, 6.)\n"
      "  %k3 : Tensor = aten::clamp(%x, None, 6.)\n"
      "  output(%c)\n");
  auto p = ConvPrepackOp::match(def(*g, "p"));
  REQUIRE(p);
  CHECK(p->weight().value() == g->findValue("w"));
  CHECK(p->padding().literal().as<std::vector<int64_t>>() == std::vector<int64_t>{2, 2});
  CHECK(p->attr() == std::optional<std::string>("none"));

  auto s1 = AddOp::match(def(*g, "s1"));
  REQUIRE(s1);
  CHECK(s1->self() == g->findValue("x"));
  CHECK(s1->other() == g->findValue("y"));
  CHECK(s1->alpha() == 1.0);
  CHECK_FALSE(s1->inPlace());
  auto s2 = AddOp::match(def(*g, "s2"));
  CHECK(s2->alpha() == 2.0);
  CHECK(s2->inPlace());
  CHECK_FALSE(AddOp::match(def(*g, "s3"))->alpha());  // computed
  CHECK(AddOp::match(def(*g, "s4"))->fusedRelu());
  CHECK_FALSE(AddOp::match(def(*g, "s5")));  // the Scalar overload

  auto c = CatOp::match(def(*g, "c"));
  REQUIRE(c);
  CHECK(c->tensors() == g->findValue("l"));
  CHECK(c->dim() == 1);

  CHECK(ClampOp::match(def(*g, "h"))->bounds() == std::make_pair(0.0, 6.0));
  CHECK(ClampOp::match(def(*g, "h2"))->bounds() == std::make_pair(-1.0, 1.0));  // hardtanh's defaults
  CHECK(ClampOp::match(def(*g, "h2"))->inPlace());
  CHECK(ClampOp::match(def(*g, "k"))->bounds() == std::make_pair(0.0, 6.0));
  CHECK_FALSE(ClampOp::match(def(*g, "k2"))->bounds());
  CHECK_FALSE(ClampOp::match(def(*g, "k3"))->bounds());
  CHECK_FALSE(ClampOp::match(def(*g, "s1")));
}
