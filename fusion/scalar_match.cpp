#include "fusion/scalar_match.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "rewriters/constants.h"

#include <cmath>
#include <string>

namespace ptopt::fusion {

std::optional<double> scalarValue(const ir::Arg& a) {
  if (a.isLiteral()) {
    const ir::Literal& l = a.literal();
    if (l.is<double>()) return l.as<double>();
    if (l.is<int64_t>()) return static_cast<double>(l.as<int64_t>());
    return std::nullopt;
  }
  std::optional<at::Tensor> t = rewriters::constantTensor(a.value());
  if (!t || t->dim() != 0 || t->is_complex()) return std::nullopt;
  return t->item<double>();
}

bool near(double value, double wanted, double relative) {
  return std::abs(value - wanted) <= relative * std::abs(wanted);
}

bool isElementwiseOp(const ir::Node* n, const char* target) {
  return n && n->isCall() && n->blocks().empty() && n->is(target) &&
         (n->overload() == "Tensor" || n->overload() == "Scalar");
}

bool unitAlpha(const ir::Node* add) {
  const ir::OpView op = ir::OpView::of(const_cast<ir::Node*>(add));
  if (!op.has("alpha")) return true;  // defaulted: 1
  const std::optional<double> alpha = op.arg("alpha").isLiteral() ? scalarValue(op.arg("alpha")) : std::nullopt;
  return alpha && *alpha == 1.0;
}

ir::Value* tensorTimesScalar(const ir::Node* n, const char* op, double wanted) {
  if (!isElementwiseOp(n, op) || n->numArgs() < 2) return nullptr;
  if (std::string(op) == "aten::add" && !unitAlpha(n)) return nullptr;
  const bool commutes = std::string(op) != "aten::div";
  for (size_t tensor : {0, 1}) {
    if (tensor == 1 && !commutes) break;
    ir::Value* t = n->arg(tensor).value();
    const std::optional<double> c = scalarValue(n->arg(1 - tensor));
    if (t && t->isTensor() && c && near(*c, wanted)) return t;
  }
  return nullptr;
}

std::string patternIneligible(const std::vector<ir::Node*>& interior, const ir::Node* result, const ir::Value* x) {
  for (const ir::Node* n : interior) {
    if (n->output()->uses().size() != 1)
      return "an intermediate value (" + ir::valueRef(n->output()) + ") has another user";
    if (n->owningBlock() != result->owningBlock()) return "its ops lie in different blocks";
  }
  const ir::TensorMeta& meta = x->meta();
  if (!meta.dtype) return "the dtype of its input is unknown (run shape-prop with --input-shape or --inputs)";
  if (!c10::isFloatingType(*meta.dtype)) return "its input is " + ir::dtypeName(*meta.dtype) + ", not floating point";
  if (!meta.shape || meta.shape->empty()) return "its input is not known to have rank 1 or more";
  return "";
}

}  // namespace ptopt::fusion
