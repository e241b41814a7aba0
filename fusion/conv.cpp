#include "fusion/conv.h"

#include "rewriters/constants.h"

namespace ptopt::fusion {

void setWeightAndBias(ir::Rewriter& rw, const ir::OpView& producer, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, const std::string& suffix) {
  ir::Node* node = producer.node();
  ir::Value* oldWeight = producer.value("weight");
  ir::Value* oldBias = producer.value("bias");
  const std::string weightName = oldWeight->node()->target();
  const std::string biasName = oldBias ? oldBias->node()->target() : rewriters::modulePrefix(weightName) + ".bias";
  if (weight) rw.setArg(node, producer.index("weight"), rw.addConstant(weightName + suffix, *weight, node));
  if (bias) rw.setArg(node, producer.index("bias"), rw.addConstant(biasName + suffix, *bias, node));
  rw.eraseConstantIfUnused(oldWeight);
  rw.eraseConstantIfUnused(oldBias);
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

void noteFold(ir::Rewriter& rw, ir::Node* into, const ir::Node* absorbed) {
  const std::string self = shortName(into);
  const std::string other = shortName(absorbed);
  const std::string& p = into->provenance();
  if (!p.empty() && p.back() == ')') {
    rw.setProvenance(into, p.substr(0, p.size() - 1) + ", " + other + ")");
    return;
  }
  rw.setProvenance(into, self + " ← fold(" + self + ", " + other + ")");
}

}  // namespace ptopt::fusion
