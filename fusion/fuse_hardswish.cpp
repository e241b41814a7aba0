#include "fusion/fuse_hardswish.h"

#include "fusion/scalar_match.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "rewriters/constants.h"

#include <optional>
#include <set>
#include <vector>

namespace ptopt::fusion {

using namespace rewriters;

namespace {

// The literal bound `name` of a clamp-like node, or nullopt (None, absent,
// computed).
std::optional<double> bound(const ir::Node* n, const char* name) {
  const ir::OpView op = ir::OpView::of(const_cast<ir::Node*>(n));
  if (!op.has(name) || !op.arg(name).isLiteral() || op.arg(name).literal().isNone()) return std::nullopt;
  return scalarValue(op.arg(name));
}
bool absentOrNone(const ir::Node* n, const char* name) {
  const ir::OpView op = ir::OpView::of(const_cast<ir::Node*>(n));
  return !op.has(name) || (op.arg(name).isLiteral() && op.arg(name).literal().isNone());
}
bool is(const std::optional<double>& v, double wanted) { return v && *v == wanted; }

// The one user of `v`, or null.
ir::Node* onlyUser(const ir::Value* v) { return v->uses().size() == 1 ? v->uses()[0].user : nullptr; }

// relu6(x + 3) ending at `last`: x and the nodes, last first; nullopt when
// `last` is not the end of one.
struct Core {
  ir::Value* x = nullptr;
  std::vector<ir::Node*> nodes;  // users first
};
std::optional<Core> matchCore(ir::Node* last) {
  Core c;
  const ir::Node* start = nullptr;  // the clamp or hardtanh reading x + 3
  const bool plain = last->overload().empty();
  if ((last->is("aten::clamp") && plain && is(bound(last, "min"), 0) && is(bound(last, "max"), 6)) ||
      (last->is("aten::hardtanh") && plain && is(bound(last, "min_val"), 0) && is(bound(last, "max_val"), 6))) {
    start = last;
    c.nodes = {last};
  } else if (last->is("aten::clamp") && plain && absentOrNone(last, "min") && is(bound(last, "max"), 6)) {
    const ir::Node* lower = producer(ir::OpView::of(last).value("self"));
    if (!lower || !lower->is("aten::clamp") || !lower->overload().empty() || !is(bound(lower, "min"), 0) ||
        !absentOrNone(lower, "max"))
      return std::nullopt;
    start = lower;
    c.nodes = {last, const_cast<ir::Node*>(lower)};
  } else if (last->is("aten::clamp_max") && plain && is(bound(last, "max"), 6)) {
    const ir::Node* lower = producer(ir::OpView::of(last).value("self"));
    if (!lower || !lower->is("aten::clamp_min") || !lower->overload().empty() || !is(bound(lower, "min"), 0))
      return std::nullopt;
    start = lower;
    c.nodes = {last, const_cast<ir::Node*>(lower)};
  } else {
    return std::nullopt;
  }
  ir::Value* shifted = ir::OpView::of(const_cast<ir::Node*>(start)).value("self");
  c.x = tensorTimesScalar(producer(shifted), "aten::add", 3.0);
  if (!c.x) return std::nullopt;
  c.nodes.push_back(shifted->node());
  return c;
}

// `/ 6` or `* (1/6)` reading `v` (its one user): that node, or null.
ir::Node* sixth(const ir::Value* v) {
  ir::Node* u = onlyUser(v);
  if (!u) return nullptr;
  if (tensorTimesScalar(u, "aten::div", 6.0) == v || tensorTimesScalar(u, "aten::mul", 1.0 / 6.0) == v) return u;
  return nullptr;
}

// `x * v` or `v * x` reading `v` (its one user): that node, or null.
ir::Node* timesX(const ir::Value* v, const ir::Value* x) {
  ir::Node* u = onlyUser(v);
  if (!isElementwiseOp(u, "aten::mul") || u->overload() != "Tensor" || u->numArgs() != 2) return nullptr;
  const ir::OpView mul = ir::OpView::of(u);
  const ir::Value* other = mul.value("self") == v ? mul.value("other") : mul.value("self");
  return other == x ? u : nullptr;
}

struct Match {
  const char* op = nullptr;  // aten::hardswish or aten::hardsigmoid
  ir::Value* x = nullptr;
  ir::Node* result = nullptr;
  std::vector<ir::Node*> interior;  // users first, the result excluded
};

std::optional<Match> matchAt(ir::Node* last) {
  std::optional<Core> core = matchCore(last);
  if (!core) return std::nullopt;
  Match m;
  m.x = core->x;
  ir::Value* r6 = last->output();
  if (ir::Node* product = timesX(r6, m.x)) {  // x * relu6(x + 3), then / 6
    ir::Node* scaled = sixth(product->output());
    if (!scaled) return std::nullopt;
    m.op = "aten::hardswish";
    m.result = scaled;
    m.interior = {product};
  } else if (ir::Node* scaled = sixth(r6)) {  // relu6(x + 3) / 6, maybe then times x
    if (ir::Node* product = timesX(scaled->output(), m.x)) {
      m.op = "aten::hardswish";
      m.result = product;
      m.interior = {scaled};
    } else {
      m.op = "aten::hardsigmoid";
      m.result = scaled;
    }
  } else {
    return std::nullopt;
  }
  m.interior.insert(m.interior.end(), core->nodes.begin(), core->nodes.end());
  return m;
}

std::string whyNot(const Match& m) { return patternIneligible(m.interior, m.result, m.x); }

}  // namespace

PassResult FuseHardswishPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  std::vector<ir::Node*> ends;  // the clamps / hardtanhs that may end a relu6(x + 3)
  graph.walk([&](ir::Node* n) {
    if (n->isCall() && n->blocks().empty() &&
        (n->is("aten::clamp") || n->is("aten::clamp_max") || n->is("aten::hardtanh")) && n->overload().empty())
      ends.push_back(n);
  });
  ir::Rewriter rw(graph, ctx.edits, name());
  std::set<const ir::Node*> erased;
  for (ir::Node* last : ends) {
    if (erased.count(last)) continue;
    std::optional<Match> m = matchAt(last);
    if (!m) continue;
    const std::string kind = m->op == std::string("aten::hardswish") ? "hardswish" : "hardsigmoid";
    if (const std::string why = whyNot(*m); !why.empty()) {
      ctx.decline(name(), m->result, kind + " written out stays: " + why);
      r.count("declined");
      continue;
    }
    std::set<ir::Value*> constants;  // once each: erasing one frees it
    std::vector<ir::Node*> all = m->interior;
    all.insert(all.begin(), m->result);
    for (ir::Node* n : all)
      for (const ir::Arg& a : n->args())
        if (a.value() && constantTensor(a.value())) constants.insert(a.value());
    ir::Value* fused = rw.createLike(m->result, m->op, {m->x}, "fuse(" + kind + ")");
    rw.replace(m->result, fused);
    for (ir::Node* n : m->interior) {
      erased.insert(n);
      rw.erase(n);
    }
    for (ir::Value* c : constants) rw.eraseConstantIfUnused(c);
    r.count("fused-" + kind);
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::fusion
