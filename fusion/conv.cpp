#include "fusion/conv.h"

#include "rewriters/constants.h"

namespace ptopt::fusion {

namespace {
std::optional<int64_t> intLiteral(const ir::Node* n, size_t i) {
  if (i >= n->numArgs() || !n->arg(i).isLiteral() || !n->arg(i).literal().is<int64_t>()) return std::nullopt;
  return n->arg(i).literal().as<int64_t>();
}
}  // namespace

std::optional<ConvInfo> asConv(const ir::Node* n) {
  if (!n->isCall()) return std::nullopt;
  const std::string& t = n->target();
  ConvInfo info;
  std::optional<int64_t> groups;
  if (t == "aten::conv1d" || t == "aten::conv2d" || t == "aten::conv3d") {
    groups = intLiteral(n, 6);
  } else if (t == "aten::conv_transpose1d" || t == "aten::conv_transpose2d" || t == "aten::conv_transpose3d") {
    info.transposed = true;
    groups = intLiteral(n, 6);
  } else if (t == "aten::_convolution" || t == "aten::convolution") {
    if (n->numArgs() < 9 || !n->arg(6).isLiteral() || !n->arg(6).literal().is<bool>()) return std::nullopt;
    info.transposed = n->arg(6).literal().as<bool>();
    groups = intLiteral(n, 8);
  } else {
    return std::nullopt;
  }
  if (!groups || *groups < 1) return std::nullopt;
  info.groups = *groups;
  return info;
}

void setWeightAndBias(ir::Graph& g, ir::Node* producer, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, const std::string& suffix) {
  ir::Value* oldWeight = producer->argValue(ConvInfo::kWeight);
  ir::Value* oldBias = producer->argValue(ConvInfo::kBias);
  const std::string weightName = oldWeight->node()->target();
  const std::string biasName = oldBias ? oldBias->node()->target() : rewriters::modulePrefix(weightName) + ".bias";
  if (weight) producer->setArg(ConvInfo::kWeight, rewriters::addConstant(g, weightName + suffix, *weight, producer));
  if (bias) producer->setArg(ConvInfo::kBias, rewriters::addConstant(g, biasName + suffix, *bias, producer));
  rewriters::eraseConstantIfUnused(oldWeight);
  rewriters::eraseConstantIfUnused(oldBias);
}

namespace {
// The module scope when the node has one, else the op's short name.
std::string shortName(const ir::Node* n) {
  if (!n->scope().empty()) return n->scope();
  const std::string& t = n->target();
  const size_t colon = t.rfind("::");
  return colon == std::string::npos ? t : t.substr(colon + 2);
}
}  // namespace

void noteFold(ir::Node* into, const ir::Node* absorbed) {
  const std::string self = shortName(into);
  const std::string other = shortName(absorbed);
  const std::string& p = into->provenance();
  if (!p.empty() && p.back() == ')') {
    into->setProvenance(p.substr(0, p.size() - 1) + ", " + other + ")");
    return;
  }
  into->setProvenance(self + " ← fold(" + self + ", " + other + ")");
}

}  // namespace ptopt::fusion
