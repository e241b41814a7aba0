// canonicalize: literal lists, conv/linear forms and no-op removal, each
// bitwise (or within 1e-6 where stated) and each with its must-not-fire case.
#include "ir/lint.h"
#include "ir/model.h"
#include "ir/text.h"
#include "rewriters/canonicalize.h"
#include "tests/support/checked_run.h"
#include "tests/support/fixtures.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"
#include "api/api.h"

#include <catch2/catch.hpp>

using namespace ptopt;
using namespace ptopt::rewriters;

namespace {

using Run = test::PassRun;

Run canonicalize(ir::Graph& g, const std::string& targetDevice = "cpu") {
  Run r;
  r.ctx.targetDevice = targetDevice;
  // Through the PassManager with the edit-log check (and the IR lint) on.
  r.result = test::runPassChecked(g, "canonicalize", r.ctx);
  ir::lintOrThrow(g, "after canonicalize");
  return r;
}

using test::runGraph;

// Runs `g` before and after canonicalize; returns the largest difference.
struct Compared {
  bool bitwise = true;
  double maxAbs = 0;
};
Compared compareOutputs(const c10::IValue& a, const c10::IValue& b) {
  Compared c;
  auto leaf = [&](const at::Tensor& x, const at::Tensor& y) {
    c.bitwise = c.bitwise && x.sizes() == y.sizes() && torch::equal(x, y);
    if (x.sizes() == y.sizes()) c.maxAbs = std::max(c.maxAbs, (x - y).abs().max().item<double>());
  };
  if (a.isTuple()) {
    const auto &ea = a.toTupleRef().elements(), &eb = b.toTupleRef().elements();
    REQUIRE(ea.size() == eb.size());
    for (size_t i = 0; i < ea.size(); ++i) leaf(ea[i].toTensor(), eb[i].toTensor());
  } else {
    leaf(a.toTensor(), b.toTensor());
  }
  return c;
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::shared_ptr<ir::ConstantTable> randomConstants(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  torch::manual_seed(0);
  auto table = std::make_shared<ir::ConstantTable>();
  for (const auto& [name, shape] : shapes) table->set(name, torch::randn(shape));
  return table;
}

}  // namespace

TEST_CASE("canonicalize turns constant ListConstructs into inline lists") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %w : Tensor):\n"
      "  %s : List[int] = prim::ListConstruct(1, 1)\n"
      "  %p : List[int] = prim::ListConstruct(0, 0)\n"
      "  %c : Tensor = aten::conv2d(%x, %w, None, %s, %p, %s, 1)\n"
      "  %f : List[float] = prim::ListConstruct(2.0, 2.0)\n"
      "  %u : Tensor = aten::upsample_nearest2d.vec(%c, None, %f)\n"
      "  %e : List[int] = prim::ListConstruct()\n"
      "  %m : Tensor = aten::sum.dim_IntList(%u, %e, False, None)\n"
      "  output(%m)\n");
  Run r = canonicalize(*g);
  CHECK(r.result.changed);
  CHECK(r.result.counter("list") == 4);
  CHECK_FALSE(contains(g->str(), "prim::ListConstruct"));
  test::checkIR(g->str(), R"(
    # CHECK: aten::conv2d(%x, %w, None, [1, 1], [0, 0], [1, 1], 1)
    # CHECK: aten::upsample_nearest2d.vec(%c, None, [2.0, 2.0])
    # CHECK: aten::sum.dim_IntList(%u, int[], False, None)
  )");
}

TEST_CASE("CanonicalizeKeepsListsThatAreMutated") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %n : int):\n"
      "  %l : List[int] = prim::ListConstruct(0, 1)\n"
      "  %a : List[int] = aten::append.t(%l, 2)\n"
      "  %p : Tensor = aten::permute(%x, %l)\n"
      "  %k : List[int] = prim::ListConstruct(1, 0)\n"
      "  aten::sort.int(%k, False)\n"
      "  %q : Tensor = aten::permute(%p, %k)\n"
      "  %kept : List[int] = prim::ListConstruct(1, 2)\n"
      "  %t : Tuple[Tensor, List[int]] = prim::TupleConstruct(%q, %kept)\n"
      "  %len : int = aten::len.t(%kept)\n"
      "  %dyn : List[int] = prim::ListConstruct(%n, 1)\n"
      "  %v : Tensor = aten::view(%q, %dyn)\n"
      "  output(%t, %v, %len)\n");
  Run r = canonicalize(*g);
  CHECK_FALSE(r.result.changed);
  CHECK(r.declined("is written by"));
  CHECK(r.declined("could keep the list"));
  test::checkIR(g->str(), R"(
    # CHECK: prim::ListConstruct(0, 1)
    # CHECK: aten::permute(%x, %l)
    # CHECK: prim::ListConstruct(1, 0)
    # CHECK: prim::ListConstruct(1, 2)
    # CHECK: prim::ListConstruct(%n, 1)
  )");
}

TEST_CASE("canonicalize rewrites _convolution to conv and conv_transpose bitwise") {
  auto constants = randomConstants({{"w2", {8, 4, 3, 3}}, {"b8", {8}}, {"wt", {4, 4, 3, 3}},
                                    {"w1", {8, 4, 3}}, {"w3", {8, 4, 3, 3, 3}}});
  ir::ParseOptions opts;
  opts.constants = constants;
  auto g = ir::parseGraph(
      "graph(%x2 : Tensor, %x1 : Tensor, %x3 : Tensor):\n"
      "  %w2 : Tensor = get_attr[\"w2\"]\n"
      "  %b8 : Tensor = get_attr[\"b8\"]\n"
      "  %wt : Tensor = get_attr[\"wt\"]\n"
      "  %w1 : Tensor = get_attr[\"w1\"]\n"
      "  %w3 : Tensor = get_attr[\"w3\"]\n"
      "  %s : List[int] = prim::ListConstruct(2, 2)\n"
      "  %p : List[int] = prim::ListConstruct(1, 1)\n"
      "  %d : List[int] = prim::ListConstruct(1, 1)\n"
      "  %o : List[int] = prim::ListConstruct(0, 0)\n"
      "  %c2 : Tensor = aten::_convolution(%x2, %w2, %b8, %s, %p, %d, False, %o, 1, False, False, True, True)\n"
      "  %op : List[int] = prim::ListConstruct(1, 1)\n"
      "  %ct : Tensor = aten::_convolution(%x2, %wt, %b8, [2, 2], [1, 1], [1, 1], True, %op, 2, False, False, True, True)\n"
      "  %c1 : Tensor = aten::_convolution(%x1, %w1, None, [1], [1], [1], False, [0], 1, False, False, True, True)\n"
      "  %c3 : Tensor = aten::_convolution.deprecated(%x3, %w3, %b8, [1, 1, 1], [0, 0, 0], [1, 1, 1], False, [0, 0, 0], 1, True, True, True)\n"
      "  %cv : Tensor = aten::convolution(%x2, %w2, None, [1, 1], [0, 0], [2, 2], False, [0, 0], 1)\n"
      "  %t : Tuple[Tensor, Tensor, Tensor, Tensor, Tensor] = prim::TupleConstruct(%c2, %ct, %c1, %c3, %cv)\n"
      "  output(%t)\n",
      opts);
  std::vector<c10::IValue> inputs = {torch::randn({1, 4, 9, 9}), torch::randn({2, 4, 16}),
                                     torch::randn({1, 4, 6, 6, 6})};
  const c10::IValue before = runGraph(*g, inputs);

  Run r = canonicalize(*g);
  CHECK(r.result.counter("conv") == 4);
  CHECK(r.result.counter("conv-transpose") == 1);
  CHECK(r.result.counter("list") == 5);
  CHECK_FALSE(contains(g->str(), "aten::_convolution"));
  CHECK_FALSE(contains(g->str(), "prim::ListConstruct"));
  test::checkIR(g->str(), R"(
    # CHECK: %c2 : Tensor = aten::conv2d(%x2, %w2, %b8, [2, 2], [1, 1], [1, 1], 1)
    # CHECK: %ct : Tensor = aten::conv_transpose2d.input(%x2, %wt, %b8, [2, 2], [1, 1], [1, 1], 2, [1, 1])
    # CHECK: %c1 : Tensor = aten::conv1d(%x1, %w1, None, [1], [1], [1], 1)
    # CHECK: %c3 : Tensor = aten::conv3d(%x3, %w3, %b8, [1, 1, 1], [0, 0, 0], [1, 1, 1], 1)
    # CHECK: %cv : Tensor = aten::conv2d(%x2, %w2, None, [1, 1], [0, 0], [2, 2], 1)
  )");
  const c10::IValue after = runGraph(*g, inputs);
  CHECK(compareOutputs(after, before).bitwise);
}

TEST_CASE("canonicalize takes the convolution rank from weight metadata") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %w : Tensor{float32, [8, 4, 3, 3]}, %v : Tensor, %n : int, %flag : bool):\n"
      "  %a : Tensor = aten::_convolution(%x, %w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, False, False, True, True)\n"
      "  %b : Tensor = aten::_convolution(%x, %w, None, [1], [0], [1], False, [0], 1, False, False, True, True)\n"
      "  %dyn : List[int] = prim::ListConstruct(%n, 0)\n"
      "  %c : Tensor = aten::_convolution(%x, %v, None, [1, 1], %dyn, [1, 1], False, [0, 0], 1, False, False, True, True)\n"
      "  %d : Tensor = aten::_convolution(%x, %v, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, %flag, False, True, True)\n"
      "  output(%a, %b, %c, %d)\n");
  Run r = canonicalize(*g);
  CHECK(r.result.counter("conv") == 1);
  CHECK(r.declined("lengths do not match rank 2"));
  CHECK(r.declined("must be literal int lists"));
  CHECK(r.declined("is not a literal"));
  test::checkIR(g->str(), R"(
    # CHECK: %a : Tensor = aten::conv2d
    # CHECK: %b : Tensor = aten::_convolution
    # CHECK: %c : Tensor = aten::_convolution
    # CHECK: %d : Tensor = aten::_convolution
  )");
}

TEST_CASE("canonicalize leaves _convolution alone on a GPU target") {
  const std::string text =
      "graph(%x : Tensor, %w : Tensor):\n"
      "  %a : Tensor = aten::_convolution(%x, %w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, False, True, True, True)\n"
      "  %b : Tensor = aten::convolution(%x, %w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)\n"
      "  output(%a, %b)\n";
  auto onGpu = ir::parseGraph(text);
  Run r = canonicalize(*onGpu, "cuda");
  CHECK(r.result.counter("conv") == 1);  // aten::convolution has no flags
  CHECK(r.declined("cuDNN flags are fixed in the graph"));
  auto onCpu = ir::parseGraph(text);
  CHECK(canonicalize(*onCpu).result.counter("conv") == 2);
}

TEST_CASE("canonicalize turns addmm with a transposed weight into linear bitwise") {
  ir::ParseOptions opts;
  opts.constants = randomConstants({{"w", {32, 16}}, {"b", {32}}});
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %b : Tensor = get_attr[\"b\"]\n"
      "  %t : Tensor = aten::t(%w)\n"
      "  %y : Tensor = aten::addmm(%b, %x, %t, 1, 1)\n"
      "  %z : Tensor = aten::addmm(%b, %x, %t, 0.5, 1)\n"
      "  %o : Tensor = aten::add.Tensor(%y, %z, 1)\n"
      "  output(%o)\n",
      opts);
  std::vector<c10::IValue> inputs = {torch::randn({4, 16})};
  const c10::IValue before = runGraph(*g, inputs);
  Run r = canonicalize(*g);
  CHECK(r.result.counter("linear") == 1);
  CHECK(r.declined("beta and alpha must be literal 1"));
  test::checkIR(g->str(), R"(
    # CHECK: %t : Tensor = aten::t(%w)
    # CHECK: %y : Tensor = aten::linear(%x, %w, %b)
    # CHECK: %z : Tensor = aten::addmm(%b, %x, %t, 0.5, 1)
  )");
  CHECK(compareOutputs(runGraph(*g, inputs), before).bitwise);
}

TEST_CASE("canonicalize turns matmul plus bias into linear only with metadata") {
  ir::ParseOptions opts;
  opts.constants = randomConstants({{"w", {32, 16}}, {"b", {32}}});
  const std::string withMeta =
      "graph(%x : Tensor{float32, [4, 16]}):\n"
      "  %w : Tensor{float32, [32, 16]} = get_attr[\"w\"]\n"
      "  %b : Tensor{float32, [32]} = get_attr[\"b\"]\n"
      "  %t : Tensor{float32, [16, 32]} = aten::t(%w)\n"
      "  %m : Tensor{float32, [4, 32]} = aten::matmul(%x, %t)\n"
      "  %y : Tensor{float32, [4, 32]} = aten::add.Tensor(%m, %b, 1)\n"
      "  output(%y)\n";
  std::vector<c10::IValue> inputs = {torch::randn({4, 16})};
  SECTION("with metadata") {
    auto g = ir::parseGraph(withMeta, opts);
    const c10::IValue before = runGraph(*g, inputs);
    Run r = canonicalize(*g);
    CHECK(r.result.counter("linear") == 1);
    test::checkIR(g->str(), R"(
      # CHECK-NOT: aten::matmul
      # CHECK-NOT: aten::t(
      # CHECK: %y : Tensor{float32, [4, 32]} = aten::linear(%x, %w, %b)
    )");
    CHECK(compareOutputs(runGraph(*g, inputs), before).maxAbs <= 1e-6);
  }
  SECTION("without metadata") {
    std::string plain = withMeta;
    for (const char* m : {"{float32, [4, 16]}", "{float32, [32, 16]}", "{float32, [32]}",
                          "{float32, [16, 32]}", "{float32, [4, 32]}"}) {
      for (size_t at; (at = plain.find(m)) != std::string::npos;) plain.erase(at, std::string(m).size());
    }
    auto g = ir::parseGraph(plain, opts);
    Run r = canonicalize(*g);
    CHECK_FALSE(r.result.changed);
    CHECK(r.declined("needs shape metadata"));
  }
}

TEST_CASE("canonicalize turns x * sigmoid(x) into silu, not a gate or a shared sigmoid") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor{float32, [2, 8]}, %g : Tensor{float32, [2, 8]}):\n"
      "  %s : Tensor{float32, [2, 8]} = aten::sigmoid(%x)\n"
      "  %a : Tensor{float32, [2, 8]} = aten::mul.Tensor(%s, %x)\n"      // silu, sigmoid first
      "  %t : Tensor{float32, [2, 8]} = aten::sigmoid(%a)\n"
      "  %b : Tensor{float32, [2, 8]} = aten::mul.Tensor(%a, %t)\n"      // silu, x first
      "  %u : Tensor{float32, [2, 8]} = aten::sigmoid(%g)\n"
      "  %c : Tensor{float32, [2, 8]} = aten::mul.Tensor(%b, %u)\n"      // a gate: sigmoid of another value
      "  %v : Tensor{float32, [2, 8]} = aten::sigmoid(%c)\n"
      "  %d : Tensor{float32, [2, 8]} = aten::mul.Tensor(%c, %v)\n"      // the sigmoid is read twice
      "  %e : Tensor{float32, [2, 8]} = aten::add.Tensor(%d, %v, 1)\n"
      "  output(%e)\n");
  std::vector<c10::IValue> inputs = {torch::randn({2, 8}), torch::randn({2, 8})};
  const c10::IValue before = runGraph(*g, inputs);
  Run r = canonicalize(*g);
  CHECK(r.result.counter("silu") == 2);
  test::checkIR(g->str(), R"(
    # CHECK: %a : Tensor{float32, [2, 8]} = aten::silu(%x)
    # CHECK: %b : Tensor{float32, [2, 8]} = aten::silu(%a)
    # CHECK: %u : Tensor{float32, [2, 8]} = aten::sigmoid(%g)
    # CHECK: aten::mul.Tensor(%b, %u)
    # CHECK: %v : Tensor{float32, [2, 8]} = aten::sigmoid(%c)
    # CHECK: aten::mul.Tensor(%c, %v)
  )");
  CHECK(compareOutputs(runGraph(*g, inputs), before).maxAbs <= 1e-6);
  SECTION("not without a floating-point dtype in the metadata") {
    auto plain = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %s : Tensor = aten::sigmoid(%x)\n"
        "  %a : Tensor = aten::mul.Tensor(%x, %s)\n"
        "  output(%a)\n");
    CHECK(canonicalize(*plain).result.counter("silu") == 0);
  }
}

TEST_CASE("canonicalize removes dropout outside training") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::dropout(%x, 0.2, False)\n"
      "  %b : Tensor = aten::feature_dropout(%a, 0.2, False)\n"
      "  %c : Tensor = aten::dropout(%b, 0.2, True)\n"
      "  output(%c)\n");
  Run r = canonicalize(*g);
  CHECK(r.result.counter("noop-dropout") == 2);
  test::checkIR(g->str(), R"(
    # CHECK-NOT: feature_dropout
    # CHECK: aten::dropout(%x, 0.2, True)
  )");
}

TEST_CASE("canonicalize removes the full slices tracing writes for x[:, :k], not the others") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::slice.Tensor(%x, 0, 0, 9223372036854775807, 1)\n"
      "  %b : Tensor = aten::slice.Tensor(%a, 1, 0, 3, 1)\n"
      "  %c : Tensor = aten::slice.Tensor(%b, 2, None, None, 1)\n"
      "  %d : Tensor = aten::slice.Tensor(%c, 3, 0, 9223372036854775807, 2)\n"
      "  output(%d)\n");
  const at::Tensor x = torch::randn({2, 5, 4, 6});
  const at::Tensor expected = test::runGraph(*g, {x}).toTensor();
  Run r = canonicalize(*g);
  CHECK(r.result.counter("noop-slice") == 2);  // dims 0 and 2; not the prefix, not the stride 2
  CHECK(test::countOps(*g, "aten::slice") == 2);
  CHECK(torch::equal(test::runGraph(*g, {x}).toTensor(), expected));
}

TEST_CASE("CanonicalizeKeepsAFullSliceThatIsMutatedInPlace") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %y : Tensor = aten::clone(%x, None)\n"
      "  %a : Tensor = aten::slice.Tensor(%y, 0, 0, 9223372036854775807, 1)\n"
      "  %u : Tensor = aten::unsqueeze_(%a, 0)\n"
      "  output(%y, %a)\n");
  Run r = canonicalize(*g);
  CHECK(r.result.counter("noop-slice") == 0);
  CHECK(r.declined("reshaped in place"));
}

TEST_CASE("canonicalize removes a full slice whose data is written in place, as GhostNet's residual add_ writes it") {
  // x[:, :k] of a cat, then add_ into it: the slice is all of the cat (k is
  // its channel count, known from metadata), so add_ may write the cat itself.
  auto g = ir::parseGraph(
      "graph(%a : Tensor{float32, [1, 8, 5, 5]}, %b : Tensor{float32, [1, 8, 5, 5]}, %r : Tensor{float32, [1, 16, 5, 5]}):\n"
      "  %l : List[Tensor] = prim::ListConstruct(%a, %b)\n"
      "  %c : Tensor{float32, [1, 16, 5, 5]} = aten::cat(%l, 1)\n"
      "  %s0 : Tensor{float32, [1, 16, 5, 5]} = aten::slice.Tensor(%c, 0, 0, 9223372036854775807, 1)\n"
      "  %s1 : Tensor{float32, [1, 16, 5, 5]} = aten::slice.Tensor(%s0, 1, 0, 16, 1)\n"
      "  %s2 : Tensor{float32, [1, 16, 5, 5]} = aten::slice.Tensor(%s1, 1, 0, 12, 1)\n"
      "  %y : Tensor = aten::add_.Tensor(%s1, %r, 1)\n"
      "  %o : Tensor = aten::relu(%y)\n"
      "  output(%o, %c, %s2)\n");
  const std::vector<c10::IValue> in{torch::randn({1, 8, 5, 5}), torch::randn({1, 8, 5, 5}), torch::randn({1, 16, 5, 5})};
  const auto expected = test::runGraph(*g, in).toTupleRef().elements().vec();
  Run r = canonicalize(*g);
  CHECK(r.result.counter("noop-slice") == 2);  // dim 0's full slice and the 16 of 16 channels; not the 12
  CHECK(test::countOps(*g, "aten::slice") == 1);
  test::checkIR(g->str(), R"(
    # CHECK: = aten::cat(%l, 1)
    # CHECK: aten::slice.Tensor(%c, 1, 0, 12, 1)
    # CHECK: aten::add_.Tensor(%c, %r, 1)
  )");
  const auto got = test::runGraph(*g, in).toTupleRef().elements().vec();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(torch::equal(got[i].toTensor(), expected[i].toTensor()));
}

TEST_CASE("CanonicalizeKeepsASliceShorterThanItsDimensionOrWithoutMetadataOrComparedByIdentity") {
  SECTION("k below the size") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor{float32, [1, 17, 5, 5]}):\n"
        "  %s : Tensor = aten::slice.Tensor(%x, 1, 0, 16, 1)\n"
        "  output(%s)\n");
    CHECK(canonicalize(*g).result.counter("noop-slice") == 0);
  }
  SECTION("no shape") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %s : Tensor = aten::slice.Tensor(%x, 1, 0, 16, 1)\n"
        "  output(%s)\n");
    CHECK(canonicalize(*g).result.counter("noop-slice") == 0);
  }
  SECTION("compared by identity") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor{float32, [1, 16, 5, 5]}):\n"
        "  %s : Tensor = aten::slice.Tensor(%x, 1, 0, 16, 1)\n"
        "  %same : bool = aten::__is__(%s, %x)\n"
        "  output(%same)\n");
    Run r = canonicalize(*g);
    CHECK(r.result.counter("noop-slice") == 0);
    CHECK(r.declined("compared by identity"));
  }
}

TEST_CASE("CanonicalizeNoopRemovalNeedsMetadata") {
  const std::string body =
      "  %v : Tensor = aten::view(%x, [2, -1])\n"
      "  %r : Tensor = aten::reshape(%v, [2, 3])\n"
      "  %c : Tensor = aten::contiguous(%r, torch.contiguous_format)\n"
      "  %t : Tensor = aten::to.dtype(%c, torch.float32, False, False, None)\n"
      "  %d : Tensor = aten::to.device(%t, device(\"cpu\"), torch.float32, False, False, None)\n"
      "  %o : Tensor = aten::relu(%d)\n"
      "  output(%o)\n";
  SECTION("without metadata nothing fires") {
    auto g = ir::parseGraph("graph(%x : Tensor):\n" + body);
    Run r = canonicalize(*g);
    CHECK_FALSE(r.result.changed);
    CHECK(r.declined("no shape metadata"));
    CHECK(r.declined("no memory-format metadata"));
    CHECK(r.declined("no dtype metadata"));
  }
  SECTION("with metadata every no-op goes") {
    // Metadata flows forward in a real graph; here every value carries it.
    std::string meta = body;
    const std::string full = "Tensor{float32, [2, 3], contiguous_format, cpu}";
    for (size_t at = 0; (at = meta.find(": Tensor =", at)) != std::string::npos; at += full.size())
      meta.replace(at + 2, 6, full);
    auto g = ir::parseGraph("graph(%x : " + full + "):\n" + meta);
    Run r = canonicalize(*g);
    CHECK(r.result.counter("noop-view") == 2);
    CHECK(r.result.counter("noop-contiguous") == 1);
    CHECK(r.result.counter("noop-to") == 2);
    test::checkIR(g->str(), R"(
      # CHECK-NOT: aten::view
      # CHECK-NOT: aten::reshape
      # CHECK-NOT: aten::contiguous
      # CHECK-NOT: aten::to
      # CHECK: aten::relu(%x)
    )");
  }
  SECTION("metadata that disagrees keeps the op") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor{float16, [3, 2], channels_last, cpu}):\n"
        "  %v : Tensor = aten::view(%x, [2, 3])\n"
        "  %c : Tensor = aten::contiguous(%x, torch.contiguous_format)\n"
        "  %t : Tensor = aten::to.dtype(%x, torch.float32, False, False, None)\n"
        "  %u : Tensor = aten::to.dtype(%x, torch.float16, False, True, None)\n"
        "  output(%v, %c, %t, %u)\n");
    CHECK_FALSE(canonicalize(*g).result.changed);
  }
  SECTION("a view that is later mutated stays") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor{float32, [2, 3]}):\n"
        "  %y : Tensor{float32, [2, 3]} = aten::clone(%x, None)\n"
        "  %v : Tensor = aten::view(%y, [2, 3])\n"
        "  %u : Tensor = aten::unsqueeze_(%v, 0)\n"
        "  output(%y, %v)\n");
    Run r = canonicalize(*g);
    CHECK_FALSE(r.result.changed);
    CHECK(r.declined("reshaped in place"));
  }
}

TEST_CASE("canonicalize on resnet18_trace is bitwise equal") {
  const auto& f = test::fixture("resnet18_trace");
  Optimizer opt = Optimizer::load(f.path);
  auto report = opt.run("canonicalize");
  REQUIRE(report.executions.size() == 1);
  const PassResult& r = report.executions[0].result;
  CHECK(r.counter("conv") == 20);
  CHECK(r.counter("list") > 0);
  const std::string text = opt.model().forward().str();
  CHECK_FALSE(contains(text, "aten::_convolution"));
  CHECK_FALSE(contains(text, "prim::ListConstruct"));
  CHECK(contains(text, "aten::conv2d("));
  auto v = opt.verify(f.inputs, {}, 2);
  INFO(v.summary);
  CHECK(v.bitwiseEqual);
}

TEST_CASE("canonicalize keeps training-mode dropout of a traced model") {
  const auto& f = test::fixture("train_mode_trace");
  Optimizer opt = Optimizer::load(f.path);
  opt.run("canonicalize");
  test::checkIR(opt.model().forward().str(), R"(
    # CHECK: aten::conv2d
    # CHECK: aten::dropout
  )");
  auto v = opt.verify(f.inputs, {}, 2);
  INFO(v.summary);
  CHECK(v.bitwiseEqual);
}

TEST_CASE("canonicalize then cse and dce keep every fixture within 1e-6") {
  verify::Tolerance tol;
  tol.rtol = 0;
  tol.atol = 1e-6;
  tol.scaleTol = 0;  // a plain 1e-6 bound: these passes do no arithmetic
  for (const auto& f : test::allFixtures()) {
    DYNAMIC_SECTION(f.name) {
      Optimizer opt = Optimizer::load(f.path);
      opt.run("canonicalize,fixpoint{max-iter=3}(cse,dce)");
      ir::lintOrThrow(opt.model().forward());
      auto v = opt.verify(f.inputs, tol, 2);
      INFO(v.summary);
      CHECK(v.passed);
    }
  }
}

// GPT-2's Conv1D: addmm(b, x.view(-1, in), W) with W [in, out] read as it is.
TEST_CASE("canonicalize turns addmm with an untransposed constant weight into linear on W^T") {
  ir::ParseOptions opts;
  opts.constants = randomConstants({{"conv1d.weight", {16, 32}}, {"conv1d.bias", {32}}});
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"conv1d.weight\"]\n"
      "  %b : Tensor = get_attr[\"conv1d.bias\"]\n"
      "  %y : Tensor = aten::addmm(%b, %x, %w, 1, 1)\n"
      "  output(%y)\n",
      opts);
  std::vector<c10::IValue> inputs = {torch::randn({4, 16})};
  const c10::IValue before = runGraph(*g, inputs);
  Run r = canonicalize(*g);
  CHECK(r.result.counter("linear") == 1);
  test::checkIR(g->str(), R"(
    # CHECK: get_attr["conv1d.weight_t"]
    # CHECK: aten::linear(%x,
    # CHECK-NOT: aten::addmm
  )");
  // Nothing reads the [in, out] original any more (export leaves it out);
  // its transpose [out, in] is stored contiguous.
  CHECK(g->str().find("get_attr[\"conv1d.weight\"]") == std::string::npos);
  const at::Tensor wt = g->constants().tensor("conv1d.weight_t");
  CHECK(wt.sizes() == at::IntArrayRef({32, 16}));
  CHECK(wt.is_contiguous());
  const Compared c = compareOutputs(runGraph(*g, inputs), before);
  CHECK(c.maxAbs < 1e-5);
}

TEST_CASE("CanonicalizeKeepsAddmmOfAComputedMatrix") {
  ir::ParseOptions opts;
  opts.constants = randomConstants({{"b", {32}}});
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %m : Tensor):\n"
      "  %b : Tensor = get_attr[\"b\"]\n"
      "  %y : Tensor = aten::addmm(%b, %x, %m, 1, 1)\n"
      "  output(%y)\n",
      opts);
  Run r = canonicalize(*g);
  CHECK(r.result.counter("linear") == 0);
  CHECK(test::countOps(*g, "aten::addmm") == 1);
}
