#include "rewriters/canonicalize.h"

#include "ir/dead_code.h"
#include "rewriters/cse.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::rewriters {

namespace {

using ir::Literal;
using ir::Node;
using ir::Value;

std::string valueName(const Value* v) { return "%" + v->name(); }

// Replaces node `n` (one output) by `m`, inserted at n's place; m keeps n's
// result name, metadata and scope.
void replaceNode(Node* n, Node* m) {
  m->insertBefore(n);
  m->setScope(n->scope());
  Value* old = n->output();
  m->output()->meta() = old->meta();
  const std::string resultName = old->name();
  old->replaceAllUsesWith(m->output());
  n->destroy();
  m->output()->setName(resultName);
}

// Replaces every use of n's result by `by` and erases n.
void forwardTo(Node* n, Value* by) {
  n->output()->replaceAllUsesWith(by);
  n->destroy();
}

const Literal* literalArg(const Node* n, const std::string& name) {
  auto i = n->argIndex(name);
  if (!i || !n->arg(*i).isLiteral()) return nullptr;
  return &n->arg(*i).literal();
}

std::optional<std::vector<int64_t>> intListArg(const Node* n, const std::string& name) {
  const Literal* l = literalArg(n, name);
  if (!l || !l->is<std::vector<int64_t>>()) return std::nullopt;
  return l->as<std::vector<int64_t>>();
}

std::optional<bool> boolArg(const Node* n, const std::string& name) {
  const Literal* l = literalArg(n, name);
  if (!l || !l->is<bool>()) return std::nullopt;
  return l->as<bool>();
}

bool isLiteralOne(const ir::Arg& a) {
  if (!a.isLiteral()) return false;
  const Literal& l = a.literal();
  return (l.is<int64_t>() && l.as<int64_t>() == 1) || (l.is<double>() && l.as<double>() == 1.0);
}

// ------------------------------------------------------------------ lists

enum class ElemKind { Int, Float, Bool };

std::optional<ElemKind> elemKindOf(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::IntType || t->str() == "SymInt") return ElemKind::Int;
  if (t->kind() == c10::TypeKind::FloatType) return ElemKind::Float;
  if (t->kind() == c10::TypeKind::BoolType) return ElemKind::Bool;
  return std::nullopt;
}

// The element kind of a schema argument typed `int[]`, `float[]?`, ... .
std::optional<ElemKind> listFormalKind(c10::TypePtr t) {
  if (t->kind() == c10::TypeKind::OptionalType) t = t->castRaw<c10::OptionalType>()->getElementType();
  if (t->kind() != c10::TypeKind::ListType) return std::nullopt;
  return elemKindOf(t->castRaw<c10::ListType>()->getElementType());
}

// The list literal a ListConstruct of literals stands for, or nullopt.
std::optional<Literal> constantList(const Node* n, ElemKind kind) {
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<bool> bools;
  for (const ir::Arg& a : n->args()) {
    if (!a.isLiteral()) return std::nullopt;
    const Literal& l = a.literal();
    if (kind == ElemKind::Int && l.is<int64_t>()) ints.push_back(l.as<int64_t>());
    else if (kind == ElemKind::Float && l.is<double>()) floats.push_back(l.as<double>());
    else if (kind == ElemKind::Bool && l.is<bool>()) bools.push_back(l.as<bool>());
    else return std::nullopt;
  }
  switch (kind) {
    case ElemKind::Int: return Literal(std::move(ints));
    case ElemKind::Float: return Literal(std::move(floats));
    case ElemKind::Bool: return Literal(std::move(bools));
  }
  return std::nullopt;
}

// Why use `u` cannot take an inline literal instead of the list, or "".
std::string listUseProblem(const ir::Use& u, ElemKind kind) {
  const Node* user = u.user;
  const c10::FunctionSchema* s = user->schema();
  if (!user->isCall() || !s || ir::opaqueMayWriteAll(user))
    return "it is used by " + describeNode(user) + ", which could keep the list";
  if (u.argIndex >= s->arguments().size()) return "it is a vararg of " + describeNode(user);
  const c10::Argument& formal = s->arguments()[u.argIndex];
  if (formal.alias_info())
    return std::string(formal.alias_info()->isWrite() ? "it is written by " : "it may be kept by ") +
           describeNode(user);
  auto formalKind = listFormalKind(formal.type());
  if (!formalKind || *formalKind != kind)
    return "argument '" + formal.name() + "' of " + describeNode(user) + " is not a list of the same kind";
  return "";
}

int64_t inlineConstantLists(ir::Graph& g, PassContext& ctx, const std::string& pass) {
  std::vector<Node*> lists;
  g.walk([&](Node* n) {
    if (n->is("prim::ListConstruct") && n->numOutputs() == 1 && n->output()->hasUses()) lists.push_back(n);
  });
  int64_t count = 0;
  for (Node* n : lists) {
    const c10::TypePtr& t = n->output()->type();
    if (t->kind() != c10::TypeKind::ListType) continue;
    auto kind = elemKindOf(t->castRaw<c10::ListType>()->getElementType());
    if (!kind) continue;
    auto literal = constantList(n, *kind);
    if (!literal) continue;  // not all literals: a genuinely dynamic list
    std::string problem;
    for (const ir::Use& u : n->output()->uses()) {
      problem = listUseProblem(u, *kind);
      if (!problem.empty()) break;
    }
    if (!problem.empty()) {
      ctx.decline(pass, n, "list stays: " + problem);
      continue;
    }
    const std::vector<ir::Use> uses = n->output()->uses();
    for (const ir::Use& u : uses) u.user->setArg(u.argIndex, *literal);
    n->destroy();
    ++count;
  }
  return count;
}

// ------------------------------------------------------------------ convolution

bool isConvolution(const Node* n) {
  return (n->is("aten::_convolution") && (n->overload().empty() || n->overload() == "deprecated")) ||
         (n->is("aten::convolution") && n->overload().empty());
}

// Returns the counter name on success, "" (and a decline) otherwise.
std::string canonicalizeConvolution(ir::Graph& g, Node* n, PassContext& ctx, const std::string& pass) {
  auto decline = [&](const std::string& why) {
    ctx.decline(pass, n, why);
    return std::string();
  };
  auto input = n->argIndex("input"), weight = n->argIndex("weight"), bias = n->argIndex("bias"),
       groups = n->argIndex("groups");
  if (!input || !weight || !bias || !groups) return decline("unexpected argument list");
  auto stride = intListArg(n, "stride"), padding = intListArg(n, "padding"),
       dilation = intListArg(n, "dilation"), outputPadding = intListArg(n, "output_padding");
  if (!stride || !padding || !dilation || !outputPadding)
    return decline("stride, padding, dilation and output_padding must be literal int lists");
  auto transposed = boolArg(n, "transposed");
  if (!transposed) return decline("'transposed' is not a literal");
  if (n->arg(*groups).isLiteral() && !n->arg(*groups).literal().is<int64_t>())
    return decline("'groups' is not an int");

  // _convolution fixes the cuDNN flags (benchmark, deterministic,
  // cudnn_enabled, allow_tf32) in the graph; conv2d reads the global ones at
  // run time. On CPU they do nothing; on a GPU they pick algorithms and TF32,
  // so the rewrite could change numerics there.
  for (const char* flag : {"benchmark", "deterministic", "cudnn_enabled", "allow_tf32"}) {
    if (!n->argIndex(flag)) continue;  // aten::convolution has none
    if (!boolArg(n, flag)) return decline(std::string("flag '") + flag + "' is not a literal");
    if (ctx.targetDevice != "cpu")
      return decline("its cuDNN flags are fixed in the graph while conv reads the global ones (target " +
                     ctx.targetDevice + ")");
  }

  size_t rank = stride->size();
  const Value* w = n->argValue(*weight);
  if (w && w->meta().shape) {
    if (w->meta().shape->size() < 3) return decline("weight metadata has rank < 3");
    rank = w->meta().shape->size() - 2;
  }
  if (rank < 1 || rank > 3) return decline("spatial rank " + std::to_string(rank) + " is not 1, 2 or 3");
  const bool sameRank = stride->size() == rank && padding->size() == rank && dilation->size() == rank &&
                        (!*transposed || outputPadding->size() == rank);
  if (!sameRank) return decline("stride/padding/dilation/output_padding lengths do not match rank " +
                                std::to_string(rank));
  if (!*transposed)
    for (int64_t p : *outputPadding)
      if (p != 0) return decline("non-zero output_padding on a non-transposed convolution");

  const std::string k = std::to_string(rank);
  const ir::Arg in = n->arg(*input), wt = n->arg(*weight), b = n->arg(*bias), gr = n->arg(*groups);
  std::string target;
  std::vector<ir::Arg> args;
  if (!*transposed) {
    target = "aten::conv" + k + "d";
    args = {in, wt, b, Literal(*stride), Literal(*padding), Literal(*dilation), gr};
  } else {
    const std::string base = "aten::conv_transpose" + k + "d";
    target = ir::findSchema(base, "input") ? base + ".input" : base;
    args = {in, wt, b, Literal(*stride), Literal(*padding), Literal(*outputPadding), gr, Literal(*dilation)};
  }
  auto [t, overload] = ir::splitQualifiedTarget(target);
  if (!ir::findSchema(t, overload)) return decline("no operator " + target);
  Node* m = g.createCall(target, std::move(args), {n->output()->type()});
  replaceNode(n, m);
  return *transposed ? "conv-transpose" : "conv";
}

// ------------------------------------------------------------------ linear

// w when `v` is `aten::t(w)`.
Value* transposedWeight(const Value* v) {
  const Node* t = v ? v->node() : nullptr;
  if (!t || !t->is("aten::t") || !t->overload().empty() || t->numArgs() != 1) return nullptr;
  return t->argValue(0);
}

void eraseIfUnused(Node* n) {
  if (n && n->isAttached() && !n->output()->hasUses()) n->destroy();
}

bool sameDtype(std::initializer_list<const Value*> vs) {
  std::optional<c10::ScalarType> d;
  for (const Value* v : vs) {
    if (!v->meta().dtype) return false;
    if (d && *d != *v->meta().dtype) return false;
    d = v->meta().dtype;
  }
  return true;
}

// aten::addmm(b, x, t(w), 1, 1) -> aten::linear(x, w, b).
bool canonicalizeAddmm(ir::Graph& g, Node* n, PassContext& ctx, const std::string& pass) {
  if (!n->is("aten::addmm") || !n->overload().empty() || n->numArgs() != 5) return false;
  Value* b = n->argValue(0);
  Value* x = n->argValue(1);
  Value* mat2 = n->argValue(2);
  Value* w = transposedWeight(mat2);
  if (!b || !x || !w) return false;
  if (!isLiteralOne(n->arg(3)) || !isLiteralOne(n->arg(4))) {
    ctx.decline(pass, n, "beta and alpha must be literal 1 to become aten::linear");
    return false;
  }
  Node* transpose = mat2->node();
  replaceNode(n, g.createCall("aten::linear", {x, w, b}, {n->output()->type()}));
  eraseIfUnused(transpose);
  return true;
}

// aten::add(aten::matmul|mm(x, t(w)), b, 1) -> aten::linear(x, w, b), with
// metadata proving the 2-D case.
bool canonicalizeMatmulAdd(ir::Graph& g, Node* n, PassContext& ctx, const std::string& pass) {
  if (!n->is("aten::add") || n->overload() != "Tensor" || n->numArgs() != 3) return false;
  for (size_t mmSide : {0, 1}) {
    Value* mmOut = n->argValue(mmSide);
    Value* b = n->argValue(1 - mmSide);
    Node* mm = mmOut ? mmOut->node() : nullptr;
    if (!b || !mm || !(mm->is("aten::matmul") || mm->is("aten::mm")) || !mm->overload().empty() ||
        mm->numArgs() != 2)
      continue;
    Value* x = mm->argValue(0);
    Value* w = transposedWeight(mm->argValue(1));
    if (!x || !w) continue;
    auto decline = [&](const std::string& why) {
      ctx.decline(pass, n, "matmul + bias is not aten::linear: " + why);
      return false;
    };
    if (!isLiteralOne(n->arg(2))) return decline("alpha is not literal 1");
    if (mmOut->uses().size() != 1) return decline(valueName(mmOut) + " has other uses");
    const auto &xs = x->meta().shape, &bs = b->meta().shape, &ms = mmOut->meta().shape;
    if (!xs || !bs || !ms) return decline("needs shape metadata (run shape-prop first)");
    if (xs->size() != 2 || bs->size() != 1 || ms->size() != 2 || (*bs)[0] != (*ms)[1])
      return decline("input is not 2-D or the bias is not 1-D of the output width");
    if (!sameDtype({x, w, b})) return decline("input, weight and bias dtypes are not proven equal");
    Node* transpose = mm->argValue(1)->node();
    replaceNode(n, g.createCall("aten::linear", {x, w, b}, {n->output()->type()}));
    mm->destroy();
    eraseIfUnused(transpose);
    return true;
  }
  return false;
}

// ------------------------------------------------------------------ no-ops

bool isDropout(const Node* n) {
  return n->isCall() && n->overload().empty() &&
         (n->is("aten::dropout") || n->is("aten::feature_dropout") || n->is("aten::alpha_dropout") ||
          n->is("aten::feature_alpha_dropout"));
}

// The counter name when n is a provable no-op (its result may be replaced by
// its first argument); "" otherwise (with a decline when it is close).
std::string noopKind(const Node* n, const MutationAnalysis& mutation, PassContext& ctx, const std::string& pass) {
  if (!n->isCall() || n->numArgs() == 0 || n->numOutputs() != 1 || !n->argValue(0)) return "";
  const Value* x = n->argValue(0);
  const ir::TensorMeta& meta = x->meta();
  auto decline = [&](const std::string& why) {
    ctx.decline(pass, n, why);
    return std::string();
  };

  if (isDropout(n)) {
    auto train = boolArg(n, "train");
    if (!train || *train) return "";  // training mode: a real random op
    return "noop-dropout";
  }

  if ((n->is("aten::view") || n->is("aten::reshape")) && n->overload().empty() && n->numArgs() == 2) {
    if (!n->arg(1).isLiteral() || !n->arg(1).literal().is<std::vector<int64_t>>()) return "";
    if (!meta.shape) return decline("no shape metadata for " + valueName(x) + " (run shape-prop first)");
    std::vector<int64_t> sizes = n->arg(1).literal().as<std::vector<int64_t>>();
    const std::vector<int64_t>& shape = *meta.shape;
    if (sizes.size() != shape.size()) return "";
    // One -1 takes whatever is left; with every other size equal, that is
    // the remaining dimension exactly when the element counts agree.
    size_t inferred = 0;
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] == -1) {
        sizes[i] = shape[i];
        ++inferred;
      }
    if (inferred > 1) return "";
    if (sizes != shape) return "";
    if (mutation.mayBeMutated(n->output()) || mutation.mayBeMutated(x))
      return decline("the view or its input may be mutated in place");
    return "noop-view";
  }

  if (n->is("aten::contiguous") && n->overload().empty()) {
    const Literal* mf = literalArg(n, "memory_format");
    const bool contiguousFormat =
        !n->argIndex("memory_format") ||
        (mf && mf->is<c10::MemoryFormat>() && mf->as<c10::MemoryFormat>() == c10::MemoryFormat::Contiguous);
    if (!contiguousFormat) return "";
    if (!meta.memoryFormat) return decline("no memory-format metadata for " + valueName(x) + " (run shape-prop first)");
    if (*meta.memoryFormat != c10::MemoryFormat::Contiguous) return "";
    if (mutation.mayBeMutated(n->output())) return decline("the result may be mutated in place");
    return "noop-contiguous";
  }

  if (n->is("aten::to") &&
      (n->overload() == "dtype" || n->overload() == "device" || n->overload() == "dtype_layout")) {
    auto copy = boolArg(n, "copy");
    if (!copy || *copy) return "";
    const Literal* mf = literalArg(n, "memory_format");
    if (n->argIndex("memory_format") &&
        !(mf && (mf->isNone() || (mf->is<c10::MemoryFormat>() &&
                                  mf->as<c10::MemoryFormat>() == c10::MemoryFormat::Preserve))))
      return "";
    // dtype (required for dtype/device, optional for dtype_layout)
    const Literal* dt = literalArg(n, "dtype");
    if (!dt || !(dt->is<c10::ScalarType>() || (dt->isNone() && n->overload() == "dtype_layout"))) return "";
    const Literal* dev = literalArg(n, "device");
    if (n->argIndex("device") && (!dev || !(dev->is<c10::Device>() || dev->isNone()))) return "";
    const Literal* layout = literalArg(n, "layout");
    if (n->argIndex("layout") && (!layout || !layout->isNone())) return "";
    const Literal* pin = literalArg(n, "pin_memory");
    if (n->argIndex("pin_memory") && (!pin || !pin->isNone())) return "";
    if (dt->is<c10::ScalarType>()) {
      if (!meta.dtype) return decline("no dtype metadata for " + valueName(x) + " (run shape-prop first)");
      if (*meta.dtype != dt->as<c10::ScalarType>()) return "";
    }
    if (dev && dev->is<c10::Device>()) {
      if (!meta.device) return decline("no device metadata for " + valueName(x) + " (run shape-prop first)");
      if (*meta.device != dev->as<c10::Device>()) return "";
    }
    if (mutation.mayBeMutated(n->output())) return decline("the result may be mutated in place");
    return "noop-to";
  }
  return "";
}

// Calls f on every node, nested blocks first; f may erase the node it is
// given and nodes before it.
void forEachNode(ir::Block* b, const std::function<void(Node*)>& f) {
  for (Node* n = b->first(); n;) {
    for (const auto& nested : n->blocks()) forEachNode(nested.get(), f);
    Node* next = n->next();
    f(n);
    n = next;
  }
}

}  // namespace

std::string CanonicalizePass::contract() const {
  return "One form per op. (1) prim::ListConstruct of int/float/bool literals becomes an inline list "
         "literal when every use is a read-only list argument of a schema'd op (lists that are "
         "written, kept or returned stay). (2) aten::_convolution / aten::convolution with literal "
         "stride/padding/dilation/output_padding and flags become conv1d/2d/3d or "
         "conv_transpose1d/2d/3d (rank from weight metadata, else the stride length), bitwise equal; "
         "_convolution only for a CPU target (its fixed cuDNN flags matter on a GPU). (3) addmm(b, x, t(w), 1, 1) becomes "
         "linear(x, w, b) (bitwise); matmul/mm(x, t(w)) + b too when metadata proves 2-D x and 1-D b "
         "of one dtype (within 1e-6). (4) No-ops become their input: dropout-family ops with "
         "train=False always; view/reshape to x's own shape, contiguous() of a contiguous x, to() of "
         "x's own dtype/device without copy only when metadata proves it (this specializes the graph to "
         "the shapes shape-prop saw). Counters: list, conv, "
         "conv-transpose, linear, noop-dropout, noop-view, noop-contiguous, noop-to.";
}

PassResult CanonicalizePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult result;
  const std::string pass = name();

  if (int64_t n = inlineConstantLists(graph, ctx, pass)) result.count("list", n);

  // Rewrites erase the node at hand and possibly its producers (which come
  // earlier), never a later node, so walking on from the saved next is safe.
  forEachNode(graph.block(), [&](Node* n) {
    if (isConvolution(n)) {
      std::string kind = canonicalizeConvolution(graph, n, ctx, pass);
      if (!kind.empty()) result.count(kind);
    } else if (canonicalizeAddmm(graph, n, ctx, pass) || canonicalizeMatmulAdd(graph, n, ctx, pass)) {
      result.count("linear");
    }
  });

  // No-ops last, over the graph as it is now (the mutation facts hold for the
  // whole stage: forwarding a no-op's result to its input only merges values
  // that already share a class).
  const MutationAnalysis mutation(graph);
  forEachNode(graph.block(), [&](Node* n) {
    std::string kind = noopKind(n, mutation, ctx, pass);
    if (kind.empty()) return;
    forwardTo(n, n->argValue(0));
    result.count(kind);
  });

  result.changed = !result.counters.empty();
  return result;
}

}  // namespace ptopt::rewriters
