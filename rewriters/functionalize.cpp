#include "rewriters/functionalize.h"

#include "ir/op_views.h"

#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace ptopt::rewriters {

namespace {

// Element-wise operators whose in-place form computes exactly what the
// out-of-place form computes, into x's memory. Every other argument is a
// scalar or a tensor operand; see resultKeepsDtype for the dtype rule.
const std::set<std::string>& functionalizable() {
  static const std::set<std::string> ops = {
      "aten::relu",      "aten::relu6",      "aten::hardtanh",  "aten::hardswish",  "aten::hardsigmoid",
      "aten::silu",      "aten::mish",       "aten::sigmoid",   "aten::tanh",       "aten::gelu",
      "aten::elu",       "aten::selu",       "aten::celu",      "aten::leaky_relu", "aten::threshold",
      "aten::clamp",     "aten::clamp_min",  "aten::clamp_max", "aten::clip",       "aten::add",
      "aten::sub",       "aten::mul",        "aten::div",       "aten::neg",        "aten::abs",
      "aten::exp",       "aten::expm1",      "aten::log",       "aten::log1p",      "aten::log2",
      "aten::log10",     "aten::sqrt",       "aten::rsqrt",     "aten::reciprocal", "aten::floor",
      "aten::ceil",      "aten::round",      "aten::trunc",     "aten::frac",       "aten::sin",
      "aten::cos",       "aten::tan",        "aten::asin",      "aten::acos",       "aten::atan",
      "aten::sinh",      "aten::cosh",       "aten::erf",       "aten::erfc",       "aten::pow",
      "aten::square",    "aten::sign",       "aten::nan_to_num", "aten::masked_fill", "aten::fill",
      "aten::remainder", "aten::fmod",       "aten::lerp",      "aten::addcmul",    "aten::addcdiv"};
  return ops;
}

// Operators whose result dtype is x's whatever the other tensors' dtypes.
bool ignoresOperandDtypes(const std::string& base) {
  return base == "aten::masked_fill" || base == "aten::fill";
}

// Operators whose schema declares a fresh result although they may return
// their input itself (dropout when not training, type_as to the same dtype).
// (ir/mutation.cpp has the same list for its alias classes.)
bool returnsInputDespiteSchema(const std::string& target) {
  return target == "aten::dropout" || target == "aten::feature_dropout" ||
         target == "aten::alpha_dropout" || target == "aten::feature_alpha_dropout" ||
         target == "aten::type_as";
}

bool isTensorFormal(const c10::Argument& a) {
  const c10::TypePtr& t = a.type();
  if (t->kind() == c10::TypeKind::TensorType) return true;
  if (t->kind() == c10::TypeKind::OptionalType)
    return t->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType;
  if (t->kind() == c10::TypeKind::ListType)
    return t->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::TensorType;
  return false;
}

// `aten::relu_`-style: a schema'd call whose first argument is written.
bool isInplaceOp(const ir::Node* n) {
  if (!n->isCall() || !n->schema() || n->numArgs() == 0) return false;
  const std::string& t = n->target();
  if (t.size() < 2 || t.back() != '_' || t[t.size() - 2] == '_') return false;
  const auto& formals = n->schema()->arguments();
  return !formals.empty() && formals[0].alias_info() && formals[0].alias_info()->isWrite();
}


}  // namespace

PassResult FunctionalizePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult result;
  ir::Rewriter rw(graph, ctx.edits, name());
  // Program order (pre-order over nested blocks): a use inside a node that
  // precedes the in-place op has a smaller number than the op.
  std::unordered_map<const ir::Node*, size_t> order;
  std::vector<ir::Node*> nodes;
  graph.walk([&](ir::Node* n) {
    order.emplace(n, order.size());
    nodes.push_back(n);
  });
  auto position = [&](const ir::Node* n) {
    auto it = order.find(n);
    return it == order.end() ? SIZE_MAX : it->second;
  };

  int64_t functionalized = 0;
  for (ir::Node* n : nodes) {
    if (!isInplaceOp(n)) continue;
    auto decline = [&](const std::string& why) { ctx.decline(name(), n, why); };

    const std::string base = n->target().substr(0, n->target().size() - 1);
    const std::string outOfPlaceName = base + (n->overload().empty() ? "" : "." + n->overload());
    if (!functionalizable().count(base)) {
      decline(n->target() + " is not in the table of element-wise ops with an exact out-of-place form");
      continue;
    }
    const c10::FunctionSchema& inplace = *n->schema();
    const auto& formals = inplace.arguments();
    bool othersWritten = false;
    for (size_t i = 1; i < formals.size(); ++i)
      othersWritten = othersWritten || (formals[i].alias_info() && formals[i].alias_info()->isWrite());
    if (othersWritten || inplace.returns().size() != 1 || n->numOutputs() != 1 ||
        formals[0].type()->kind() != c10::TypeKind::TensorType) {
      decline("schema is not `Tensor(a!) self, ... -> Tensor(a!)`");
      continue;
    }
    const c10::FunctionSchema* pure = ir::findSchema(base, n->overload());
    if (!pure) {
      decline("no out-of-place operator " + outOfPlaceName);
      continue;
    }
    bool compatible = pure->arguments().size() == formals.size() && pure->returns().size() == 1 &&
                      !pure->returns()[0].alias_info() && !pure->is_mutable();
    for (size_t i = 0; compatible && i < formals.size(); ++i)
      compatible = pure->arguments()[i].name() == formals[i].name() &&
                   *pure->arguments()[i].type() == *formals[i].type() && !pure->arguments()[i].alias_info();
    if (!compatible) {
      decline(outOfPlaceName + " does not take the same arguments");
      continue;
    }

    // x: the mutated value (the schema's first argument, checked above to be
    // the written one).
    ir::Value* x = ir::OpView::of(n).value(formals[0].name());
    if (!x) continue;  // a literal self cannot happen for a schema'd Tensor
    ir::Node* producer = x->node();
    if (!producer) {
      decline(ir::valueRef(x) + " is a block parameter (loop-carried or shared with the caller)");
      continue;
    }
    if (producer->opcode() == ir::Opcode::Placeholder) {
      decline(ir::valueRef(x) + " is a graph input: the caller would see the mutation");
      continue;
    }
    if (producer->opcode() == ir::Opcode::GetAttr) {
      decline(ir::valueRef(x) + " is a constant (get_attr): the mutation persists across calls");
      continue;
    }
    if (producer->owningBlock() != n->owningBlock()) {
      decline(ir::valueRef(x) + " is defined outside this block (a loop body or branch would mutate it)");
      continue;
    }
    const c10::FunctionSchema* ps = producer->schema();
    if (!ps || returnsInputDespiteSchema(producer->target()) || x->index() >= ps->returns().size() ||
        ps->returns()[x->index()].alias_info()) {
      decline(ir::valueRef(x) + " comes from " + producer->qualifiedTarget() +
              ", whose result may alias another value");
      continue;
    }

    // Uses before the op must only read x; uses after it are redirected.
    const size_t here = position(n);
    std::string aliasedBy;
    for (const ir::Use& u : x->uses()) {
      if (u.user == n || position(u.user) > here) continue;
      const c10::FunctionSchema* us = u.user->schema();
      const bool readOnly = u.user->isCall() && us && u.argIndex < us->arguments().size() &&
                            !us->arguments()[u.argIndex].alias_info();
      if (!readOnly) {
        aliasedBy = describeNode(u.user);
        break;
      }
    }
    if (!aliasedBy.empty()) {
      decline(ir::valueRef(x) + " is aliased or written by " + aliasedBy + " before the in-place op");
      continue;
    }

    // The in-place op keeps x's dtype; the out-of-place one promotes over its
    // tensor operands. Scalars never raise the result above x's dtype when the
    // in-place op succeeds (it refuses to cast down a category).
    std::string unproven;
    if (!ignoresOperandDtypes(base)) {
      for (size_t i = 1; i < n->numArgs() && i < formals.size(); ++i) {
        const ir::Value* v = n->argValue(i);
        if (!v || !isTensorFormal(formals[i])) continue;
        if (!x->meta().dtype || !v->meta().dtype || *x->meta().dtype != *v->meta().dtype) {
          unproven = ir::valueRef(v);
          break;
        }
      }
    }
    if (!unproven.empty()) {
      decline("cannot prove " + unproven + " has the dtype of " + ir::valueRef(x) +
              " (the out-of-place op would promote); needs dtype metadata (run shape-prop first)");
      continue;
    }

    // Rewrite. After n, x and its result are the same tensor.
    ir::Value* y = n->output();
    rw.replaceUsesIf(x, y, [&](const ir::Use& u) { return u.user != n && position(u.user) > here; });
    std::vector<ir::Arg> args(n->args().begin(), n->args().end());
    ir::Node* m = graph.createCall(outOfPlaceName, std::move(args), {y->type()});
    m->setScope(n->scope());
    m->output()->meta() = y->meta();  // lint: detached (its insert is the edit)
    rw.insert(m, n);
    const std::string resultName = y->name();
    order.erase(n);
    rw.replace(n, m->output());
    rw.setName(m->output(), resultName);
    order[m] = here;
    ++functionalized;
  }

  result.changed = rw.changed();
  if (functionalized) result.count("functionalized", functionalized);
  return result;
}

}  // namespace ptopt::rewriters
