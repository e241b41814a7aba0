#include "fusion/fold_conv_affine.h"

#include "fusion/bn_math.h"
#include "fusion/conv.h"
#include "rewriters/constants.h"

namespace ptopt::fusion {

using namespace rewriters;

std::string FoldConvAffinePass::contract() const {
  return "Matches conv OP c for OP in add, sub, mul, div (.Tensor or .Scalar; also c + conv and c * conv) "
         "where c is a literal number or a constant tensor broadcasting per output channel (one element, "
         "[C, 1, ...] of the output's rank minus one, or [1, C, 1, ...] when metadata shows a batched input; "
         "same dtype as the weight). mul/div scale weight and bias per output channel (division becomes "
         "multiplication by 1/c in float64); add/sub shift the bias by alpha * c (a conv without bias gains "
         "one). New constants get derived names (conv1.weight.affine); nothing is mutated; chains fold in one "
         "run. Does not fire when the conv's output has another user, the weight is not constant or is "
         "written in place, c does not broadcast per channel, for c - conv and c / conv, or across blocks.";
}

namespace {

enum class Op { Add, Sub, Mul, Div };

struct AffineMatch {
  Op op;
  size_t convArg, constArg;
  double alpha = 1;
};

std::optional<AffineMatch> matchOp(const ir::Node* n) {
  static const std::pair<const char*, Op> kOps[] = {
      {"aten::add", Op::Add}, {"aten::sub", Op::Sub}, {"aten::mul", Op::Mul}, {"aten::div", Op::Div}};
  if (!n->isCall() || (n->overload() != "Tensor" && n->overload() != "Scalar")) return std::nullopt;
  for (const auto& [target, op] : kOps) {
    if (n->target() != target) continue;
    AffineMatch m{op, 0, 1};
    const bool hasAlpha = op == Op::Add || op == Op::Sub;
    if (hasAlpha) {
      if (n->numArgs() != 3 || !n->arg(2).isLiteral()) return std::nullopt;
      const auto& a = n->arg(2).literal();
      if (a.is<int64_t>()) m.alpha = static_cast<double>(a.as<int64_t>());
      else if (a.is<double>()) m.alpha = a.as<double>();
      else return std::nullopt;
    } else if (n->numArgs() != 2) {
      return std::nullopt;
    }
    // `c + conv` and `c * conv` commute (for add only when alpha is 1).
    const ir::Value* first = n->argValue(0);
    const bool firstIsConv = first && first->node() && asConv(first->node());
    if (!firstIsConv && n->overload() == "Tensor" &&
        ((op == Op::Mul) || (op == Op::Add && m.alpha == 1))) {
      m.convArg = 1;
      m.constArg = 0;
    }
    return m;
  }
  return std::nullopt;
}

// The per-output-channel values of c (float64, length channels), or nullopt.
std::optional<at::Tensor> perChannel(const ir::Node* n, size_t i, int64_t channels, int64_t outRank,
                                     at::ScalarType weightType, const ir::Value* convInput, std::string& why) {
  const ir::Arg& a = n->arg(i);
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
  if (c->dim() > 0 && c->scalar_type() != weightType) { why = "the constant's dtype differs from the weight's"; return std::nullopt; }
  if (c->numel() == 1 && c->dim() <= outRank - 1) return at::full({channels}, c->item<double>(), at::TensorOptions().dtype(at::kDouble));
  auto onlyChannel = [&](int64_t channelDim) {
    for (int64_t d = 0; d < c->dim(); ++d)
      if (c->size(d) != (d == channelDim ? channels : 1)) return false;
    return true;
  };
  if (c->dim() == outRank - 1 && onlyChannel(0)) return c->reshape({channels}).to(at::kDouble);
  if (c->dim() == outRank && onlyChannel(1)) {
    const auto& shape = convInput->meta().shape;
    if (shape && static_cast<int64_t>(shape->size()) == outRank) return c->reshape({channels}).to(at::kDouble);
    why = "a [1, C, 1, ...] constant needs shape metadata showing a batched input";
    return std::nullopt;
  }
  why = "the constant does not broadcast per output channel";
  return std::nullopt;
}

}  // namespace

PassResult FoldConvAffinePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  std::vector<ir::Node*> candidates;
  graph.walk([&](ir::Node* n) {
    if (matchOp(n)) candidates.push_back(n);
  });
  for (ir::Node* n : candidates) {
    auto m = matchOp(n);
    if (!m) continue;
    ir::Value* y = n->argValue(m->convArg);
    ir::Node* conv = y ? y->node() : nullptr;
    auto info = conv ? asConv(conv) : std::nullopt;
    if (!info) continue;
    auto decline = [&](const std::string& why) {
      ctx.decline(name(), n, why);
      r.count("declined");
    };
    if (m->convArg == 1 && (m->op == Op::Sub || m->op == Op::Div)) { decline("c - conv and c / conv are not affine in the weights"); continue; }
    if (valueUses(y) != 1) { decline("the conv's output has another user"); continue; }
    if (conv->owningBlock() != n->owningBlock()) { decline("conv and operation are in different blocks"); continue; }
    auto weight = constantTensorArg(conv, ConvInfo::kWeight);
    if (!weight || isWrittenAnywhere(conv->argValue(ConvInfo::kWeight)) || !at::isFloatingType(weight->scalar_type())) {
      decline("the conv weight is not a floating-point constant");
      continue;
    }
    std::optional<at::Tensor> bias;
    if (!(conv->arg(ConvInfo::kBias).isLiteral() && conv->arg(ConvInfo::kBias).literal().isNone())) {
      bias = constantTensorArg(conv, ConvInfo::kBias);
      if (!bias) { decline("the conv bias is not a constant"); continue; }
    }
    const int64_t channels = info->transposed ? weight->size(1) * info->groups : weight->size(0);
    std::string why;
    auto v = perChannel(n, m->constArg, channels, weight->dim(), weight->scalar_type(), conv->argValue(0), why);
    if (!v) { decline(why); continue; }

    at::Tensor newWeight = *weight;
    std::optional<at::Tensor> newBias = bias;
    const auto dtype = weight->scalar_type();
    switch (m->op) {
      case Op::Mul:
      case Op::Div: {
        const at::Tensor scale = m->op == Op::Mul ? *v : v->reciprocal();
        newWeight = foldWeight(*weight, scale, info->transposed, info->groups);
        if (bias) newBias = (bias->to(at::kDouble) * scale).to(dtype);
        break;
      }
      case Op::Add:
      case Op::Sub: {
        const double sign = m->op == Op::Add ? m->alpha : -m->alpha;
        at::Tensor b = bias ? bias->to(at::kDouble) : at::zeros({channels}, at::TensorOptions().dtype(at::kDouble));
        newBias = (b + sign * *v).to(dtype);
        break;
      }
    }
    ir::Value* operand = n->argValue(m->constArg);
    const bool scales = m->op == Op::Mul || m->op == Op::Div;
    setWeightAndBias(graph, conv, scales ? std::optional<at::Tensor>(newWeight) : std::nullopt, newBias, ".affine");
    noteFold(conv, n);
    n->output()->replaceAllUsesWith(y);
    n->destroy();
    eraseConstantIfUnused(operand);
    r.count("folded");
    r.changed = true;
  }
  return r;
}

}  // namespace ptopt::fusion
