#include "fusion/fuse_gelu.h"

#include "fusion/scalar_match.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "rewriters/constants.h"

#include <cmath>
#include <optional>
#include <set>
#include <vector>

namespace ptopt::fusion {

using namespace rewriters;

namespace {

constexpr double kHalf = 0.5;
constexpr double kOne = 1.0;
constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kTanhCubic = 0.044715;
constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kInvSqrt2 = 0.7071067811865476;
// One spelled-out GELU: its input x, its result, and the nodes to erase
// once the result is replaced, each list users first: the product's inner
// mul, the `1 + ...` add, the core (tanh or erf and what computes its
// argument from x).
struct GeluMatch {
  ir::Value* x = nullptr;
  ir::Node* result = nullptr;
  std::vector<ir::Node*> product, core;
  ir::Node* onePlus = nullptr;
  const char* approximate = "none";
  std::vector<ir::Node*> interior() const {
    std::vector<ir::Node*> all = product;
    all.push_back(onePlus);
    all.insert(all.end(), core.begin(), core.end());
    return all;
  }
};

// The product of x, 0.5 and `factor` (the 1 + tanh/erf term), in any
// association: (x * 0.5) * f, (x * f) * 0.5, x * (f * 0.5). `factor` has one
// user, which is where the product starts.
bool matchProduct(ir::Value* x, ir::Value* factor, GeluMatch& m) {
  if (factor->uses().size() != 1) return false;
  ir::Node* user = factor->uses()[0].user;
  if (!isElementwiseOp(user, "aten::mul") || user->numArgs() != 2) return false;
  const size_t at = factor->uses()[0].argIndex;
  ir::Value* other = user->arg(1 - at).value();
  if (const std::optional<double> c = scalarValue(user->arg(1 - at)); c && near(*c, kHalf)) {
    // factor * 0.5, then times x: x * (factor * 0.5)
    ir::Value* half = user->output();
    if (half->uses().size() != 1) return false;
    ir::Node* outer = half->uses()[0].user;
    if (!isElementwiseOp(outer, "aten::mul") || outer->numArgs() != 2) return false;
    if (outer->arg(1 - half->uses()[0].argIndex).value() != x) return false;
    m.result = outer;
    m.product = {user};
    return true;
  }
  if (!other) return false;
  if (other == x) {
    // (x * factor) * 0.5
    ir::Value* xf = user->output();
    if (xf->uses().size() != 1) return false;
    ir::Node* outer = xf->uses()[0].user;
    if (tensorTimesScalar(outer, "aten::mul", kHalf) != xf) return false;
    m.result = outer;
    m.product = {user};
    return true;
  }
  // (x * 0.5) * factor
  const ir::Node* halfX = producer(other);
  if (tensorTimesScalar(halfX, "aten::mul", kHalf) != x || other->uses().size() != 1) return false;
  m.result = user;
  m.product = {const_cast<ir::Node*>(halfX)};
  return true;
}

// tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3))): x, and the nodes inside
// (users first), given the tanh.
std::optional<GeluMatch> matchTanhCore(ir::Node* tanh) {
  ir::Value* scaled = ir::OpView::of(tanh).value("self");
  ir::Value* inner = tensorTimesScalar(producer(scaled), "aten::mul", kSqrt2OverPi);
  const ir::Node* sum = producer(inner);
  if (!inner || !isElementwiseOp(sum, "aten::add") || sum->overload() != "Tensor" || !unitAlpha(sum)) return std::nullopt;
  for (size_t cubicAt : {0, 1}) {
    ir::Value* x = sum->arg(1 - cubicAt).value();
    ir::Value* cubicTerm = sum->arg(cubicAt).value();
    ir::Value* cube = tensorTimesScalar(producer(cubicTerm), "aten::mul", kTanhCubic);
    const ir::Node* pow = producer(cube);
    if (!x || !cube || !pow || !pow->is("aten::pow") || pow->overload() != "Tensor_Scalar") continue;
    const ir::OpView power = ir::OpView::of(const_cast<ir::Node*>(pow));
    if (power.value("self") != x) continue;
    const std::optional<double> exponent =
        power.arg("exponent").isLiteral() ? scalarValue(power.arg("exponent")) : std::nullopt;
    if (!exponent || *exponent != 3.0) continue;
    GeluMatch m;
    m.x = x;
    m.approximate = "tanh";
    m.core = {tanh, scaled->node(), inner->node(), cubicTerm->node(), cube->node()};
    return m;
  }
  return std::nullopt;
}

// erf(x / sqrt(2)) or erf(x * (1/sqrt(2))), given the erf.
std::optional<GeluMatch> matchErfCore(ir::Node* erf) {
  ir::Value* scaled = ir::OpView::of(erf).value("self");
  ir::Value* x = tensorTimesScalar(producer(scaled), "aten::div", kSqrt2);
  if (!x) x = tensorTimesScalar(producer(scaled), "aten::mul", kInvSqrt2);
  if (!x) return std::nullopt;
  GeluMatch m;
  m.x = x;
  m.core = {erf, scaled->node()};
  return m;
}

// Why the matched GELU cannot be replaced, or "".
std::string whyNot(const GeluMatch& m) { return patternIneligible(m.interior(), m.result, m.x); }

}  // namespace

PassResult FuseGeluPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  std::vector<ir::Node*> cores;
  graph.walk([&](ir::Node* n) {
    if (n->isCall() && (n->is("aten::tanh") || n->is("aten::erf")) && n->overload().empty()) cores.push_back(n);
  });
  ir::Rewriter rw(graph, ctx.edits, name());
  for (ir::Node* core : cores) {
    std::optional<GeluMatch> m = core->is("aten::tanh") ? matchTanhCore(core) : matchErfCore(core);
    if (!m) continue;
    // 1 + tanh(...) or 1 + erf(...), then the product with x and 0.5.
    if (core->output()->uses().size() != 1) {
      ctx.decline(name(), core, "the " + core->target().substr(6) + " has another user");
      r.count("declined");
      continue;
    }
    m->onePlus = core->output()->uses()[0].user;
    if (tensorTimesScalar(m->onePlus, "aten::add", kOne) != core->output() ||
        !matchProduct(m->x, m->onePlus->output(), *m))
      continue;
    if (const std::string why = whyNot(*m); !why.empty()) {
      ctx.decline(name(), m->result, "GELU written out (" + std::string(m->approximate) + " form) stays: " + why);
      r.count("declined");
      continue;
    }
    std::set<ir::Value*> constants;  // once each: erasing one frees it
    const std::vector<ir::Node*> interior = m->interior();
    for (ir::Node* n : interior)
      for (const ir::Arg& a : n->args())
        if (a.value() && constantTensor(a.value())) constants.insert(a.value());
    ir::Value* gelu = rw.createLike(m->result, "aten::gelu", {m->x, ir::Literal(std::string(m->approximate))},
                                    std::string("fuse(gelu, ") + m->approximate + ")");
    rw.replace(m->result, gelu);
    for (ir::Node* n : interior) rw.erase(n);
    for (ir::Value* c : constants) rw.eraseConstantIfUnused(c);
    r.count(m->approximate == std::string("tanh") ? "fused-tanh" : "fused-erf");
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::fusion
