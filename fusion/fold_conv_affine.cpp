#include "fusion/fold_conv_affine.h"

#include "fusion/bn_math.h"
#include "fusion/conv.h"
#include "ir/op_views.h"
#include "rewriters/constants.h"

#include <fmt/format.h>

namespace ptopt::fusion {

using namespace rewriters;

namespace {

enum class Op { Add, Sub, Mul, Div };

struct AffineMatch {
  Op op;
  bool producerRight = false;  // `c OP P`: the conv or linear's result is `other`, c is `self`
  double alpha = 1;
  const char* producerArg() const { return producerRight ? "other" : "self"; }
  const char* constArg() const { return producerRight ? "self" : "other"; }
};

// A conv or a linear: output channels on weight dim 0 (dim 1 per group for
// transposed convs); the channel dim of a linear's output is its last.
struct Producer {
  ir::OpView view;  // weight, bias and input by name
  bool linear = false;
  bool transposed = false;
  int64_t groups = 1;
};

std::optional<Producer> asProducer(ir::Node* n) {
  if (!n) return std::nullopt;
  // A linear with every argument written out (input, weight, bias).
  if (auto linear = ir::LinearOp::match(n); linear && n->numArgs() == 3) return Producer{*linear, true};
  if (auto conv = ir::ConvOp::match(n)) return Producer{*conv, false, conv->transposed(), conv->groups()};
  return std::nullopt;
}

std::optional<AffineMatch> matchOp(ir::Node* n) {
  static const std::pair<const char*, Op> kOps[] = {
      {"aten::add", Op::Add}, {"aten::sub", Op::Sub}, {"aten::mul", Op::Mul}, {"aten::div", Op::Div}};
  if (!n->isCall() || (n->overload() != "Tensor" && n->overload() != "Scalar")) return std::nullopt;
  for (const auto& [target, op] : kOps) {
    if (n->target() != target) continue;
    // add/sub(self, other, alpha), mul/div(self, other), all arguments written out.
    const ir::OpView view = ir::OpView::of(n);
    if (!view.has("self") || !view.has("other")) return std::nullopt;
    AffineMatch m{op};
    const bool hasAlpha = op == Op::Add || op == Op::Sub;
    if (hasAlpha) {
      if (n->numArgs() != 3 || !view.literal("alpha")) return std::nullopt;
      auto alpha = view.floatArg("alpha");
      if (!alpha) return std::nullopt;
      m.alpha = *alpha;
    } else if (n->numArgs() != 2) {
      return std::nullopt;
    }
    // The producer on the right: `c + alpha*P`, `c - alpha*P`, `c * P`
    // (and `c / P`, which is declined).
    ir::Value* first = view.value("self");
    const bool firstIsProducer = first && asProducer(first->node());
    m.producerRight = !firstIsProducer && n->overload() == "Tensor";
    return m;
  }
  return std::nullopt;
}

// Why `c` cannot stand in for itself converted to `weightType`, or "".
// Type promotion: a 0-dim constant never changes the dtype of a floating
// result, a dimensioned one does when its dtype wins (float64 against a
// float32 conv); integers and bools never win against floats, but then every
// value must survive the conversion (2^24 + 1 does not in float32).
std::string dtypeProblem(const at::Tensor& c, at::ScalarType weightType) {
  const at::ScalarType t = c.scalar_type();
  if (t == weightType) return "";
  if (at::isFloatingType(t)) {
    if (c.dim() > 0 && at::promoteTypes(t, weightType) != weightType)
      return fmt::format("a {} constant would promote the {} output to {}", c10::toString(t),
                         c10::toString(weightType), c10::toString(at::promoteTypes(t, weightType)));
    return "";
  }
  if (!at::isIntegralType(t, /*includeBool=*/true)) return fmt::format("a {} constant is not a real number", c10::toString(t));
  if (t == at::kBool) return "";
  // Exact iff value -> double -> integer and value -> weightType -> double both round-trip.
  const at::Tensor asDouble = c.to(at::kDouble);
  const at::Tensor exact = asDouble.to(t).eq(c).logical_and(c.to(weightType).to(at::kDouble).eq(asDouble));
  if (exact.all().item<bool>()) return "";
  const int64_t bad = exact.logical_not().flatten().nonzero().flatten()[0].item<int64_t>();
  return fmt::format("the {} constant holds {}, which {} cannot represent exactly", c10::toString(t),
                     c.flatten()[bad].item<int64_t>(), c10::toString(weightType));
}

// The per-output-channel values of c (float64, length channels), or nullopt.
std::optional<at::Tensor> perChannel(const ir::Arg& a, int64_t channels, const Producer& producer,
                                     int64_t weightRank, at::ScalarType weightType, std::string& why) {
  const ir::Node* p = producer.view.node();
  if (a.isLiteral()) {
    const auto& l = a.literal();
    double v;
    if (l.is<int64_t>()) v = static_cast<double>(l.as<int64_t>());
    else if (l.is<double>()) v = l.as<double>();
    else { why = "the operand is not a number"; return std::nullopt; }
    return at::full({channels}, v, at::TensorOptions().dtype(at::kDouble));
  }
  auto c = constantTensor(a.value());
  if (!c) { why = "the other operand is not a constant"; return std::nullopt; }
  if (std::string problem = dtypeProblem(*c, weightType); !problem.empty()) { why = problem; return std::nullopt; }
  auto onlyChannel = [&](int64_t channelDim) {
    for (int64_t d = 0; d < c->dim(); ++d)
      if (c->size(d) != (d == channelDim ? channels : 1)) return false;
    return true;
  };
  auto perChannelValues = [&] { return c->reshape({channels}).to(at::kDouble); };
  auto single = [&] { return at::full({channels}, c->to(at::kDouble).item<double>(), at::TensorOptions().dtype(at::kDouble)); };
  if (producer.linear) {
    // The output is [..., C]; a constant of more dims than the output would widen it.
    const auto& shape = p->output()->meta().shape;
    const int64_t knownRank = shape ? static_cast<int64_t>(shape->size()) : 1;
    if (c->dim() > knownRank) {
      why = shape ? "the constant has more dims than the linear's output"
                  : "a constant of more than one dim needs shape metadata of the linear's output (give --input-shape)";
      return std::nullopt;
    }
    if (c->numel() == 1) return single();
    if (c->dim() >= 1 && onlyChannel(c->dim() - 1)) return perChannelValues();
    why = "the constant does not broadcast per output feature";
    return std::nullopt;
  }
  const int64_t outRank = weightRank;  // batched conv output
  if (c->numel() == 1 && c->dim() <= outRank - 1) return single();
  if (c->dim() == outRank - 1 && onlyChannel(0)) return perChannelValues();
  if (c->dim() == outRank && onlyChannel(1)) {
    const auto& shape = producer.view.value("input")->meta().shape;
    if (shape && static_cast<int64_t>(shape->size()) == outRank) return perChannelValues();
    why = "a [1, C, 1, ...] constant needs shape metadata showing a batched input";
    return std::nullopt;
  }
  why = "the constant does not broadcast per output channel";
  return std::nullopt;
}

}  // namespace

PassResult FoldConvAffinePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  std::vector<ir::Node*> candidates;
  graph.walk([&](ir::Node* n) {
    if (matchOp(n)) candidates.push_back(n);
  });
  for (ir::Node* n : candidates) {
    auto m = matchOp(n);
    if (!m) continue;
    const ir::OpView op = ir::OpView::of(n);
    ir::Value* y = op.value(m->producerArg());
    ir::Node* p = y ? y->node() : nullptr;
    auto producer = asProducer(p);
    if (!producer) continue;
    const ir::OpView& pv = producer->view;
    const char* what = producer->linear ? "linear" : "conv";
    auto decline = [&](const std::string& why) {
      if (ctx.declineOnce(name(), n, why)) r.count("declined");
    };
    if (m->producerRight && m->op == Op::Div) {
      decline(fmt::format("c / {} is not affine in the weights", what));
      continue;
    }
    if (valueUses(y) != 1) { decline(fmt::format("the {}'s output has another user", what)); continue; }
    if (p->owningBlock() != n->owningBlock()) { decline(fmt::format("{} and operation are in different blocks", what)); continue; }
    auto weight = constantTensor(pv.value("weight"));
    if (!weight || isWrittenAnywhere(pv.value("weight")) || !at::isFloatingType(weight->scalar_type()) ||
        (producer->linear && weight->dim() != 2)) {
      decline(fmt::format("the {} weight is not a floating-point constant", what));
      continue;
    }
    std::optional<at::Tensor> bias;
    if (!pv.isNone("bias")) {
      bias = constantTensor(pv.value("bias"));
      if (!bias) { decline(fmt::format("the {} bias is not a constant", what)); continue; }
    }
    const int64_t channels = producer->transposed ? weight->size(1) * producer->groups : weight->size(0);
    std::string why;
    auto v = perChannel(op.arg(m->constArg()), channels, *producer, weight->dim(), weight->scalar_type(), why);
    if (!v) { decline(why); continue; }
    if (m->op == Op::Div && v->eq(0).any().item<bool>()) { decline("the divisor has a zero"); continue; }

    // The result is P * scale + shift per output channel:
    //   P + alpha*c, P - alpha*c:  scale 1,       shift +-alpha*c
    //   c + alpha*P, c - alpha*P:  scale +-alpha, shift c
    //   P * c, c * P, P / c:       scale c (1/c), shift 0
    const bool producerLeft = !m->producerRight;
    const double sign = m->op == Op::Sub ? -1.0 : 1.0;
    std::optional<at::Tensor> scale;
    at::Tensor shift = at::zeros({channels}, at::TensorOptions().dtype(at::kDouble));
    switch (m->op) {
      case Op::Mul: scale = *v; break;
      case Op::Div: scale = v->reciprocal(); break;
      case Op::Add:
      case Op::Sub:
        if (producerLeft) shift = sign * m->alpha * *v;
        else { scale = at::full({channels}, sign * m->alpha, at::TensorOptions().dtype(at::kDouble)); shift = *v; }
        break;
    }
    const auto dtype = weight->scalar_type();
    std::optional<at::Tensor> newWeight;
    if (scale) newWeight = foldWeight(*weight, *scale, producer->transposed, producer->groups);
    at::Tensor b = bias ? bias->to(at::kDouble) : at::zeros({channels}, at::TensorOptions().dtype(at::kDouble));
    std::optional<at::Tensor> newBias;
    if (bias || m->op == Op::Add || m->op == Op::Sub) newBias = ((scale ? b * *scale : b) + shift).to(dtype);
    ir::Value* operand = op.value(m->constArg());
    setWeightAndBias(rw, pv, newWeight, newBias, ".affine");
    noteFold(rw, p, n);
    rw.replace(n, y);
    rw.eraseConstantIfUnused(operand);
    r.count("folded");
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::fusion
