#include "rewriters/canonicalize.h"

#include "ir/mutation.h"
#include "ir/op_views.h"
#include "rewriters/constants.h"

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::rewriters {

namespace {

using ir::Literal;
using ir::Node;
using ir::OpView;
using ir::Rewriter;
using ir::Value;


// Replaces node `n` (one output) by the detached call `m`, inserted at n's
// place; m keeps n's result name, metadata and scope.
void replaceNode(Rewriter& rw, Node* n, Node* m) {
  m->setScope(n->scope());
  m->output()->meta() = n->output()->meta();  // lint: detached (its insert is the edit)
  rw.insert(m, n);
  const std::string resultName = n->output()->name();
  rw.replace(n, m->output());
  rw.setName(m->output(), resultName);
}

// Argument `name` is the literal 1 (int or float).
bool isLiteralOne(const OpView& op, const std::string& name) {
  const Literal* l = op.literal(name);
  return l && ((l->is<int64_t>() && l->as<int64_t>() == 1) || (l->is<double>() && l->as<double>() == 1.0));
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

int64_t inlineConstantLists(Rewriter& rw, PassContext& ctx, const std::string& pass) {
  std::vector<Node*> lists;
  rw.graph().walk([&](Node* n) {
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
    for (const ir::Use& u : uses) rw.setArg(u.user, u.argIndex, *literal);
    rw.erase(n);
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
// (Not ir::ConvOp: that view wants a literal `groups`, while a computed one
// is carried over here as it is.)
std::string canonicalizeConvolution(Rewriter& rw, Node* n, PassContext& ctx, const std::string& pass) {
  auto decline = [&](const std::string& why) {
    ctx.decline(pass, n, why);
    return std::string();
  };
  const OpView conv = OpView::of(n);
  if (!conv.has("input") || !conv.has("weight") || !conv.has("bias") || !conv.has("groups"))
    return decline("unexpected argument list");
  auto stride = conv.intListArg("stride"), padding = conv.intListArg("padding"),
       dilation = conv.intListArg("dilation"), outputPadding = conv.intListArg("output_padding");
  if (!stride || !padding || !dilation || !outputPadding)
    return decline("stride, padding, dilation and output_padding must be literal int lists");
  auto transposed = conv.boolArg("transposed");
  if (!transposed) return decline("'transposed' is not a literal");
  if (conv.literal("groups") && !conv.intArg("groups")) return decline("'groups' is not an int");

  // _convolution fixes the cuDNN flags (benchmark, deterministic,
  // cudnn_enabled, allow_tf32) in the graph; conv2d reads the global ones at
  // run time. On CPU they do nothing; on a GPU they pick algorithms and TF32,
  // so the rewrite could change numerics there.
  for (const char* flag : {"benchmark", "deterministic", "cudnn_enabled", "allow_tf32"}) {
    if (!conv.has(flag)) continue;  // aten::convolution has none
    if (!conv.boolArg(flag)) return decline(std::string("flag '") + flag + "' is not a literal");
    if (ctx.targetDevice != "cpu")
      return decline("its cuDNN flags are fixed in the graph while conv reads the global ones (target " +
                     ctx.targetDevice + ")");
  }

  size_t rank = stride->size();
  const Value* w = conv.value("weight");
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
  const ir::Arg in = conv.arg("input"), wt = conv.arg("weight"), b = conv.arg("bias"), gr = conv.arg("groups");
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
  replaceNode(rw, n, rw.graph().createCall(target, std::move(args), {n->output()->type()}));
  return *transposed ? "conv-transpose" : "conv";
}

// ------------------------------------------------------------------ linear

// w when `v` is `aten::t(w)`.
Value* transposedWeight(const Value* v) {
  Node* t = v ? v->node() : nullptr;
  if (!t || !t->is("aten::t") || !t->overload().empty() || t->numArgs() != 1) return nullptr;
  return OpView::of(t).value("self");
}

void eraseIfUnused(Rewriter& rw, Node* n) {
  if (n && n->isAttached() && !n->output()->hasUses()) rw.erase(n);
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

// A constant 2-D float weight [in, out] read untransposed by addmm (GPT-2's
// Conv1D), or nullopt.
std::optional<at::Tensor> untransposedWeight(const Value* mat2) {
  auto w = constantTensor(mat2);
  if (!w || w->dim() != 2 || !w->is_floating_point() || w->requires_grad()) return std::nullopt;
  return w;
}

// aten::addmm(b, x, t(w), 1, 1) -> aten::linear(x, w, b), and
// aten::addmm(b, x, W, 1, 1) with a constant W -> aten::linear(x, W^T, b)
// (W^T a new contiguous constant `<W>_t`).
bool canonicalizeAddmm(Rewriter& rw, Node* n, PassContext& ctx, const std::string& pass) {
  if (!n->is("aten::addmm") || !n->overload().empty() || n->numArgs() != 5) return false;
  const OpView addmm = OpView::of(n);
  Value* b = addmm.value("self");
  Value* x = addmm.value("mat1");
  Value* mat2 = addmm.value("mat2");
  Value* w = transposedWeight(mat2);
  const std::optional<at::Tensor> constantW = w ? std::nullopt : untransposedWeight(mat2);
  if (!b || !x || (!w && !constantW)) return false;
  if (!isLiteralOne(addmm, "beta") || !isLiteralOne(addmm, "alpha")) {
    ctx.decline(pass, n, "beta and alpha must be literal 1 to become aten::linear");
    return false;
  }
  Node* producer = mat2->node();
  if (constantW) w = rw.addConstant(producer->target() + "_t", constantW->t().contiguous(), n);
  replaceNode(rw, n, rw.graph().createCall("aten::linear", {x, w, b}, {n->output()->type()}));
  if (constantW) rw.eraseConstantIfUnused(mat2);
  else eraseIfUnused(rw, producer);
  return true;
}

// aten::add(aten::matmul|mm(x, t(w)), b, 1) -> aten::linear(x, w, b), with
// metadata proving the 2-D case.
bool canonicalizeMatmulAdd(Rewriter& rw, Node* n, PassContext& ctx, const std::string& pass) {
  if (!n->is("aten::add") || n->overload() != "Tensor" || n->numArgs() != 3) return false;
  const OpView add = OpView::of(n);
  // The product may be either operand of the sum.
  for (const auto& [mmSide, biasSide] : {std::pair{"self", "other"}, std::pair{"other", "self"}}) {
    Value* mmOut = add.value(mmSide);
    Value* b = add.value(biasSide);
    Node* mm = mmOut ? mmOut->node() : nullptr;
    if (!b || !mm || !(mm->is("aten::matmul") || mm->is("aten::mm")) || !mm->overload().empty() ||
        mm->numArgs() != 2)
      continue;
    const OpView product = OpView::of(mm);
    Value* x = product.value("self");
    Value* mat2 = product.value(mm->is("aten::mm") ? "mat2" : "other");
    Value* w = transposedWeight(mat2);
    if (!x || !w) continue;
    auto decline = [&](const std::string& why) {
      ctx.decline(pass, n, "matmul + bias is not aten::linear: " + why);
      return false;
    };
    if (!isLiteralOne(add, "alpha")) return decline("alpha is not literal 1");
    if (mmOut->uses().size() != 1) return decline(ir::valueRef(mmOut) + " has other uses");
    const auto &xs = x->meta().shape, &bs = b->meta().shape, &ms = mmOut->meta().shape;
    if (!xs || !bs || !ms) return decline("needs shape metadata (run shape-prop first)");
    if (xs->size() != 2 || bs->size() != 1 || ms->size() != 2 || (*bs)[0] != (*ms)[1])
      return decline("input is not 2-D or the bias is not 1-D of the output width");
    if (!sameDtype({x, w, b})) return decline("input, weight and bias dtypes are not proven equal");
    Node* transpose = mat2->node();
    replaceNode(rw, n, rw.graph().createCall("aten::linear", {x, w, b}, {n->output()->type()}));
    rw.erase(mm);
    eraseIfUnused(rw, transpose);
    return true;
  }
  return false;
}

// aten::mul(x, aten::sigmoid(x)) (either order) -> aten::silu(x): SiLU as
// run_decompositions() writes it. Only when the sigmoid's one reader is the
// mul and metadata shows x is a floating-point tensor (silu has no integer
// kernel, where sigmoid promotes).
bool canonicalizeSilu(Rewriter& rw, Node* n) {
  if (!n->is("aten::mul") || n->overload() != "Tensor" || n->numArgs() != 2) return false;
  const OpView mul = OpView::of(n);
  for (const auto& [xSide, sigmoidSide] : {std::pair{"self", "other"}, std::pair{"other", "self"}}) {
    Value* x = mul.value(xSide);
    Value* s = mul.value(sigmoidSide);
    Node* sigmoid = s ? s->node() : nullptr;
    if (!x || !sigmoid || !sigmoid->is("aten::sigmoid") || !sigmoid->overload().empty() ||
        OpView::of(sigmoid).value("self") != x || s->uses().size() != 1)
      continue;
    if (!x->meta().dtype || !c10::isFloatingType(*x->meta().dtype)) return false;
    replaceNode(rw, n, rw.graph().createCall("aten::silu", {x}, {n->output()->type()}));
    rw.erase(sigmoid);
    return true;
  }
  return false;
}

// ------------------------------------------------------------------ no-ops

// A no-op found by noopKind: the counter name and the input its result
// equals.
struct Noop {
  std::string kind;
  Value* input = nullptr;
};

// The no-op `n` provably is (its result may be replaced by its input); an
// empty kind otherwise (with a decline when it is close).
Noop noopKind(Node* n, const ir::MutationAnalysis& mutation, PassContext& ctx, const std::string& pass) {
  if (!n->isCall() || n->numArgs() == 0 || n->numOutputs() != 1) return {};
  auto decline = [&](const std::string& why) {
    ctx.decline(pass, n, why);
    return Noop{};
  };

  if (auto dropout = ir::DropoutOp::match(n); dropout && !dropout->inPlace() && n->overload().empty()) {
    Value* x = dropout->input();
    auto train = dropout->train();
    if (!x || !train || *train) return {};  // training mode: a real random op
    return {"noop-dropout", x};
  }

  const OpView op = OpView::of(n);
  Value* x = op.value("self");
  if (!x) return {};
  const ir::TensorMeta& meta = x->meta();

  // x[:, :] as tracing writes every full dimension of x[:, :k], and x[:, :k]
  // on a 4-D feature map's channels where metadata shows k is all of them
  // (GhostNet's `out[:, :self.out_chs]` after a cat of that many): a
  // view of all of x with x's sizes, strides and offset, so x itself. Data
  // written in place through either is seen by both alike; not so a change
  // of geometry in place (an in-place view op such as unsqueeze_, resize_)
  // or an identity comparison, which decline.
  if (n->is("aten::slice") && n->overload() == "Tensor") {
    auto isInt = [&](const char* name, int64_t v) {
      const Literal* l = op.literal(name);
      return l && l->is<int64_t>() && l->as<int64_t>() == v;
    };
    auto isNoneOr = [&](const char* name, int64_t v) {
      const Literal* l = op.literal(name);
      return !op.has(name) || (l && (l->isNone() || (l->is<int64_t>() && l->as<int64_t>() == v)));
    };
    if (!isNoneOr("start", 0) || !isInt("step", 1)) return {};
    if (!isNoneOr("end", std::numeric_limits<int64_t>::max())) {
      // A literal end at or past the known size of a 4-D feature map's
      // channel dimension: the weights fix it, where a batch or sequence
      // length (x[:, :max_len]) would vary with the input.
      const Literal* end = op.literal("end");
      const Literal* dim = op.literal("dim");
      if (!end || !end->is<int64_t>() || !dim || !dim->is<int64_t>() || !meta.shape || meta.shape->size() != 4)
        return {};
      if (dim->as<int64_t>() != 1 && dim->as<int64_t>() != -3) return {};
      if ((*meta.shape)[1] < 0 || end->as<int64_t>() < (*meta.shape)[1]) return {};
    }
    if (meta.dtype && c10::isQIntType(*meta.dtype))
      return decline("a quantized tensor: an in-place op may give the view its own quantizer");
    if (mutation.mayBeReshaped(n->output()) || mutation.mayBeReshaped(x))
      return decline("the slice or its input may be reshaped in place or compared by identity");
    return {"noop-slice", x};
  }

  if ((n->is("aten::view") || n->is("aten::reshape")) && n->overload().empty() && n->numArgs() == 2) {
    const ir::Arg* size = ir::LayoutOp::match(n)->size();
    if (!size || !size->isLiteral() || !size->literal().is<std::vector<int64_t>>()) return {};
    if (!meta.shape) return decline("no shape metadata for " + ir::valueRef(x) + " (run shape-prop first)");
    std::vector<int64_t> sizes = size->literal().as<std::vector<int64_t>>();
    const std::vector<int64_t>& shape = *meta.shape;
    if (sizes.size() != shape.size()) return {};
    // One -1 takes whatever is left; with every other size equal, that is
    // the remaining dimension exactly when the element counts agree.
    size_t inferred = 0;
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] == -1) {
        sizes[i] = shape[i];
        ++inferred;
      }
    if (inferred > 1) return {};
    if (sizes != shape) return {};
    if (mutation.mayBeReshaped(n->output()) || mutation.mayBeReshaped(x))
      return decline("the view or its input may be reshaped in place or compared by identity");
    return {"noop-view", x};
  }

  if (n->is("aten::contiguous") && n->overload().empty()) {
    const Literal* mf = op.literal("memory_format");
    const bool contiguousFormat =
        !op.has("memory_format") ||
        (mf && mf->is<c10::MemoryFormat>() && mf->as<c10::MemoryFormat>() == c10::MemoryFormat::Contiguous);
    if (!contiguousFormat) return {};
    if (!meta.memoryFormat) return decline("no memory-format metadata for " + ir::valueRef(x) + " (run shape-prop first)");
    if (*meta.memoryFormat != c10::MemoryFormat::Contiguous) return {};
    if (mutation.mayBeMutated(n->output())) return decline("the result may be mutated in place");
    return {"noop-contiguous", x};
  }

  if (n->is("aten::to") &&
      (n->overload() == "dtype" || n->overload() == "device" || n->overload() == "dtype_layout")) {
    auto copy = op.boolArg("copy");
    if (!copy || *copy) return {};
    const Literal* mf = op.literal("memory_format");
    if (op.has("memory_format") &&
        !(mf && (mf->isNone() || (mf->is<c10::MemoryFormat>() &&
                                  mf->as<c10::MemoryFormat>() == c10::MemoryFormat::Preserve))))
      return {};
    // dtype (required for dtype/device, optional for dtype_layout)
    const Literal* dt = op.literal("dtype");
    if (!dt || !(dt->is<c10::ScalarType>() || (dt->isNone() && n->overload() == "dtype_layout"))) return {};
    const Literal* dev = op.literal("device");
    if (op.has("device") && (!dev || !(dev->is<c10::Device>() || dev->isNone()))) return {};
    const Literal* layout = op.literal("layout");
    if (op.has("layout") && (!layout || !layout->isNone())) return {};
    const Literal* pin = op.literal("pin_memory");
    if (op.has("pin_memory") && (!pin || !pin->isNone())) return {};
    if (dt->is<c10::ScalarType>()) {
      if (!meta.dtype) return decline("no dtype metadata for " + ir::valueRef(x) + " (run shape-prop first)");
      if (*meta.dtype != dt->as<c10::ScalarType>()) return {};
    }
    if (dev && dev->is<c10::Device>()) {
      if (!meta.device) return decline("no device metadata for " + ir::valueRef(x) + " (run shape-prop first)");
      if (*meta.device != dev->as<c10::Device>()) return {};
    }
    if (mutation.mayBeMutated(n->output())) return decline("the result may be mutated in place");
    return {"noop-to", x};
  }
  return {};
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

PassResult CanonicalizePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult result;
  const std::string pass = name();
  Rewriter rw(graph, ctx.edits, pass);

  if (int64_t n = inlineConstantLists(rw, ctx, pass)) result.count("list", n);

  // Rewrites erase the node at hand and possibly its producers (which come
  // earlier), never a later node, so walking on from the saved next is safe.
  forEachNode(graph.block(), [&](Node* n) {
    if (isConvolution(n)) {
      std::string kind = canonicalizeConvolution(rw, n, ctx, pass);
      if (!kind.empty()) result.count(kind);
    } else if (canonicalizeAddmm(rw, n, ctx, pass) || canonicalizeMatmulAdd(rw, n, ctx, pass)) {
      result.count("linear");
    } else if (canonicalizeSilu(rw, n)) {
      result.count("silu");
    }
  });

  // No-ops last, over the graph as it is now (the mutation facts hold for the
  // whole stage: forwarding a no-op's result to its input only merges values
  // that already share a class).
  const ir::MutationAnalysis mutation(graph);
  forEachNode(graph.block(), [&](Node* n) {
    Noop noop = noopKind(n, mutation, ctx, pass);
    if (noop.kind.empty()) return;
    rw.replace(n, noop.input);
    result.count(noop.kind);
  });

  result.changed = rw.changed();
  return result;
}

}  // namespace ptopt::rewriters
