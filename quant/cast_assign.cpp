// cast's assignment (the contract is in quant/cast.h; the split of the work
// in quant/cast_assign.h): one walk of the graph in program order that gives
// each op a precision by the op-policy table and the conditions of the
// contract, and asks CastValues (quant/cast_values.h) for the conversions
// each decision needs.
#include "quant/cast_assign.h"

#include "ir/literal.h"
#include "ir/mutation.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "quant/cast_pieces.h"
#include "quant/cast_values.h"
#include "rewriters/constants.h"
#include "target/kernel_probes.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ptopt::quant {

using namespace rewriters;

namespace {

// A tensor input of a node: a direct argument, or an element of a
// prim::ListConstruct the node consumes alone (cat, stack, einsum).
struct Input {
  ir::Node* owner;
  size_t index;
  ir::Value* value() const { return owner->argValue(index); }
};


// The argument an in-place op writes: its first (`Tensor(a!) self`), which is
// what writesFirstArgument checks in its schema.
constexpr size_t kWrittenArg = 0;
// The first argument of a listed op (self/input): its result's dtype follows
// it unless a dtype literal says otherwise.
constexpr size_t kFirstInput = 0;
// prim::ListUnpack's one argument, the list.
constexpr size_t kUnpackedList = 0;

bool writesFirstArgument(const ir::Node* n) {
  const auto* s = n->schema();
  if (!s || s->arguments().empty() || n->numArgs() == 0) return false;
  const auto& alias = s->arguments()[0].alias_info();
  return alias && alias->isWrite();
}

// An operator whose result is a view of its first argument (`Tensor(a) self`
// returning `Tensor(a)`) works in any dtype.
bool returnsViewOfFirstArgument(const ir::Node* n) {
  const auto* s = n->schema();
  if (!s || s->arguments().empty() || s->returns().size() != 1) return false;
  const auto& in = s->arguments()[0].alias_info();
  const auto& out = s->returns()[0].alias_info();
  return in && !in->isWrite() && out && !out->isWrite() && s->returns()[0].type()->kind() == c10::TypeKind::TensorType;
}

const ir::Literal* literalArg(const ir::Node* n, const std::string& name) {
  return ir::OpView::of(const_cast<ir::Node*>(n)).literal(name);
}

// Transposed convolutions (conv_transpose*d, or _convolution/convolution
// with transposed=true), by spatial rank; 0 when `n` is not one.
int64_t transposedConvRank(const ir::Node* n) {
  const auto conv = ir::ConvOp::match(n);
  if (!conv || !conv->transposed()) return 0;
  if (auto dims = conv->spatialDimsFromName()) return *dims;
  auto w = constantTensor(conv->weight());
  return w ? w->dim() - 2 : 2;
}

using target::cpuRunsTransposedConv;

class Caster {
 public:
  using Config = CastAssignment;

  Caster(ir::Graph& g, PassContext& ctx, std::string passName, Config cfg)
      : g_(g), ctx_(ctx), pass_(std::move(passName)), cfg_(std::move(cfg)), mutation_(g), rw_(g, ctx.edits, pass_),
        values_(g, rw_, ctx, pass_, {cfg_.target, cfg_.emulate, cfg_.clamp}, mutation_) {}

  PassResult run() {
    processBlock(g_.block(), /*top=*/true);
    values_.finish();
    r_.changed = rw_.changed();
    r_.count("lowered", lowered_);
    r_.count("casts", static_cast<int64_t>(values_.castsLeft()));
    r_.count("weights", values_.weights());
    r_.count("literals", literals_ + values_.literals());
    r_.count("fp32", fp32Kept_);
    if (outOfRange_) r_.count("out-of-range", outOfRange_);
    if (values_.clamped()) r_.count("clamped", values_.clamped());
    if (ioChanged_) r_.count(rewriters::kSignatureChangedCounter, ioChanged_);
    if (split_) r_.count("split", split_);
    if (listsKept_) r_.count("lists-kept", listsKept_);
    if (broadcastFactors_) r_.count("factors-lowered", broadcastFactors_);
    return r_;
  }

 private:
  // ------------------------------------------------------------ states

  ValueState& state(const ir::Value* v) { return values_.state(v); }
  void markLowered(ir::Value* v) { values_.markLowered(v); }
  bool isFloat32(const ir::Value* v) { return state(v).original == kFloat; }
  // A tensor that is (or may be) floating point: known float32, or unknown.
  bool floatOrUnknown(const ir::Value* v) { return v->isTensor() && (!state(v).original || isFloat32(v)); }
  // An integer or bool tensor (an attention mask, indices): not data to
  // lower; it stays as it is beside the lowered inputs.
  bool integralOrBool(const ir::Value* v) {
    const auto& s = state(v);
    return !s.lowered && s.original && !c10::isFloatingType(*s.original) && !c10::isComplexType(*s.original);
  }

  std::optional<c10::ScalarType> metaOrType(const ir::Value* v) {
    if (v->meta().dtype) return v->meta().dtype;
    if (auto t = v->type() ? v->type()->cast<c10::TensorType>() : nullptr)
      if (auto st = t->scalarType()) return *st;  // c10::optional in LibTorch 1.13
    return std::nullopt;
  }

  // ------------------------------------------------------------ walk

  void processBlock(ir::Block* b, bool top) {
    for (ir::Node* n : b->nodes()) {
      switch (n->opcode()) {
        case ir::Opcode::Placeholder: visitPlaceholder(n); break;
        case ir::Opcode::GetAttr: visitGetAttr(n); break;
        case ir::Opcode::Output:
          if (top && !cfg_.keepIo) {
            for (size_t i = 0; i < n->numArgs(); ++i)
              if (n->arg(i).isValue() && state(n->argValue(i)).lowered) ++ioChanged_;
          } else {
            restoreAll(n);
          }
          break;
        case ir::Opcode::CallFunction:
          if (!n->blocks().empty()) visitControlFlow(n);
          else visitCall(n);
          break;
      }
    }
  }

  void visitPlaceholder(ir::Node* n) {
    ir::Value* v = n->output();
    state(v).original = metaOrType(v);
    if (!cfg_.keepIo && isFloat32(v)) {
      markLowered(v);
      ++ioChanged_;
    }
  }

  void visitGetAttr(ir::Node* n) {
    ir::Value* v = n->output();
    auto t = constantTensor(v);
    if (!t) return;
    auto& s = state(v);
    s.original = t->scalar_type();
    s.weak = s.original == kFloat && !mutation_.mayBeWritten(v);
  }

  void visitControlFlow(ir::Node* n) {
    restoreAll(n);
    for (const auto& b : n->blocks()) {
      for (const auto& p : b->params()) state(p.get()).original = metaOrType(p.get());
      processBlock(b.get(), false);
    }
    for (const auto& out : n->outputs()) state(out.get()).original = metaOrType(out.get());
  }

  void visitCall(ir::Node* n) {
    if (n->is("prim::ListConstruct") && absorbedByConsumer(n)) return;  // its consumer casts the elements
    if (n->is("prim::ListUnpack") && n->numArgs() == 1 && loweredLists_.count(n->arg(kUnpackedList).value())) {
      for (const auto& out : n->outputs()) markLowered(out.get());  // pieces visitPieces kept low
      return;
    }
    if (n->is("aten::to") || n->is("aten::type_as")) return visitTo(n);
    if (writesFirstArgument(n) && n->arg(kWrittenArg).value()) return visitInPlace(n);
    OpPrecision cls = cfg_.policy.classify(*n);
    if (cls == OpPrecision::Follow && returnsTensorList(n)) return visitPieces(n);
    if (cls == OpPrecision::Fp32 && !listed(n) && returnsViewOfFirstArgument(n)) cls = OpPrecision::Follow;
    switch (cls) {
      case OpPrecision::LowPrecision: return visitLowPrecision(n);
      case OpPrecision::Follow:
      case OpPrecision::Promote: return visitElementwise(n, cls);
      case OpPrecision::Factory: return visitFactory(n);
      case OpPrecision::Neutral: return;
      case OpPrecision::Fp32: return visitFp32(n);
    }
  }

  bool listed(const ir::Node* n) const { return cfg_.policy.knows(n->target()); }

  // split, chunk, unbind of a lowered tensor (quant/cast_pieces.h): the
  // pieces of a list only unpacked and never written stay low unless that
  // costs more casts (one per piece an fp32 op reads) than one cast before
  // the split plus one per piece a low-precision op reads. Any other list
  // is a container: its input goes back to its original dtype.
  void visitPieces(ir::Node* n) {
    ir::Value* self = n->numArgs() ? n->arg(kFirstInput).value() : nullptr;
    if (self && self->isTensor() && state(self).lowered && listOnlyUnpacked(n) && !mutation_.mayBeWritten(n->output())) {
      const PieceReaders r = pieceReaders(n, cfg_.policy, cfg_.keepFp32);
      if (r.fp32 <= 1 + r.low) {
        loweredLists_.insert(n->output());
        ++listsKept_;
        return;
      }
    }
    restoreAll(n);
    setOutputsOriginal(n, std::nullopt);
  }

  // A list built only for one op that casts its elements itself.
  bool absorbedByConsumer(const ir::Node* list) {
    const ir::Value* v = list->output();
    if (v->uses().size() != 1) return false;
    const ir::Node* user = v->uses()[0].user;
    if (!user->isCall() || !user->blocks().empty() || writesFirstArgument(user)) return false;
    const OpPrecision cls = cfg_.policy.classify(*user);
    return cls == OpPrecision::LowPrecision || cls == OpPrecision::Promote || cls == OpPrecision::Follow;
  }

  std::vector<Input> tensorInputs(ir::Node* n) {
    std::vector<Input> out;
    for (size_t i = 0; i < n->numArgs(); ++i) {
      ir::Value* v = n->argValue(i);
      if (!v) continue;
      if (v->isTensor()) {
        out.push_back({n, i});
      } else if (v->node() && v->node()->is("prim::ListConstruct") && absorbedByConsumer(v->node())) {
        ir::Node* list = v->node();
        for (size_t j = 0; j < list->numArgs(); ++j)
          if (list->argValue(j) && list->argValue(j)->isTensor()) out.push_back({list, j});
      }
    }
    return out;
  }

  // Every lowered input goes back to its original dtype.
  void restoreAll(ir::Node* n) {
    for (const Input& in : tensorInputs(n)) restore(in);
    // Lists consumed whole (not absorbed) were restored when visited.
  }

  void restore(const Input& in) {
    ir::Value* v = in.value();
    if (!state(v).lowered) return;
    rw_.setArg(in.owner, in.index, values_.toOriginal(v, in.owner));
  }

  void setOutputsOriginal(ir::Node* n, std::optional<c10::ScalarType> inferred) {
    for (const auto& out : n->outputs()) {
      auto& s = state(out.get());
      s.original = out->meta().dtype ? out->meta().dtype : (n->numOutputs() == 1 && out->isTensor() ? inferred : std::nullopt);
    }
  }

  void visitFp32(ir::Node* n) {
    bool floatIn = false;
    for (const Input& in : tensorInputs(n)) {
      floatIn = floatIn || state(in.value()).lowered || isFloat32(in.value());
      restore(in);
    }
    std::optional<c10::ScalarType> inferred;
    if (listed(n)) {
      if (n->numArgs() && n->arg(kFirstInput).value()) inferred = state(n->arg(kFirstInput).value()).original;
      if (const ir::Literal* d = literalArg(n, "dtype"); d && d->is<c10::ScalarType>()) inferred = d->as<c10::ScalarType>();
      if (floatIn) ++fp32Kept_;
    }
    setOutputsOriginal(n, inferred);
  }

  void visitLowPrecision(ir::Node* n) {
    const auto inputs = tensorInputs(n);
    bool anyFloat = false;
    std::string why;
    for (const Input& in : inputs) {
      const ir::Value* v = in.value();
      const auto& s = state(v);
      if (s.lowered || s.original == kFloat) anyFloat = true;
      else if (integralOrBool(v)) continue;  // scaled_dot_product_attention's bool mask
      else if (s.original && why.empty())
        why = "input " + ir::valueRef(v) + " is " + ir::dtypeName(*s.original) + ", not float32";
    }
    if (!anyFloat && why.empty()) why = "no input is known to be float32 (run shape-prop with --input-shape)";
    if (why.empty()) why = checkWeakConversions(n, inputs, /*count=*/true);
    if (why.empty()) why = smallConv(n);
    if (why.empty() && n->numOutputs() >= 1 && cfg_.keepFp32.count(n->output(0)->name()))
      why = "measured (--tune, keep-fp32): not faster in " + ir::dtypeName(cfg_.target) + " with its casts here";
    if (why.empty()) why = undefinedOutputs(n);
    if (why.empty() && cfg_.cpuKernelsOnly) {
      if (int64_t rank = transposedConvRank(n); rank && !cpuRunsTransposedConv(rank, cfg_.target))
        why = "this LibTorch has no " + ir::dtypeName(cfg_.target) + " transposed conv on the CPU (probed)";
    }
    if (!why.empty()) {
      ctx_.decline(pass_, n, "stays fp32: " + why);
      visitFp32(n);
      return;
    }
    // Kernels require equal dtypes: an unknown input next to a float32 one is float32.
    for (const Input& in : inputs)
      if (!integralOrBool(in.value())) lower(in);
    ++lowered_;
    finishLoweredOutputs(n);
  }

  // Why a conv is too small to pay for low precision, or "". Its weight is
  // [out, in/groups, k...]; in = in/groups * groups.
  std::string smallConv(const ir::Node* n) const {
    if (cfg_.minChannels <= 0) return "";
    // groups by name: argument 8 of _convolution/convolution (6 is `transposed`), 6 of the others.
    const auto conv = ir::ConvOp::match(n);
    if (!conv) return "";
    auto w = constantTensor(conv->weight());
    if (!w || w->dim() < 3) return "";
    const int64_t groups = conv->groups();
    const bool transposed = conv->transposed();
    const int64_t out = transposed ? w->size(1) * groups : w->size(0);
    const int64_t in = transposed ? w->size(0) : w->size(1) * groups;
    if (in >= cfg_.minChannels || out >= cfg_.minChannels) return "";
    return fmt::format("a small conv ({} -> {} channels, below min-channels={}): on a CPU its bf16 kernel and the "
                       "casts around it cost more than fp32", in, out, cfg_.minChannels);
  }

  // nn.MultiheadAttention's fast path returns (attention, weights), and
  // with need_weights=False its weights are an undefined tensor: no cast can
  // read it, so it is left as it is (and its dtype unknown). Whether it is
  // defined must be known before the op is lowered.
  static bool returnsUndefinedWeights(const ir::Node* n) {
    if (!n->is("aten::_native_multi_head_attention")) return false;
    const ir::Literal* needWeights = literalArg(n, "need_weights");
    return needWeights && needWeights->is<bool>() && !needWeights->as<bool>();
  }
  std::string undefinedOutputs(const ir::Node* n) const {
    if (!n->is("aten::_native_multi_head_attention") || returnsUndefinedWeights(n)) return "";
    const ir::Literal* needWeights = literalArg(n, "need_weights");
    if (needWeights && needWeights->is<bool>()) return "";  // need_weights=True: both results are data
    return "need_weights is computed at run time: whether its second result (the attention weights) is a "
           "tensor to cast back is not known";
  }

  void finishLoweredOutputs(ir::Node* n) {
    const bool skipWeights = returnsUndefinedWeights(n);
    for (const auto& out : n->outputs()) {
      if (!out->isTensor()) continue;
      if (skipWeights && out->index() == 1) continue;
      markLowered(out.get());
      if (cfg_.emulate) values_.roundResult(out.get());
    }
  }

  // The element count of `v` where shape-prop knows every dimension.
  static std::optional<int64_t> knownNumel(const ir::Value* v) {
    const auto& shape = v->meta().shape;
    if (!shape) return std::nullopt;
    int64_t n = 1;
    for (int64_t d : *shape) n *= d;
    return n;
  }

  // `x * s` in bf16 where x is lowered and s, float32, broadcasts against it
  // with at most 1/16 of its elements (a squeeze-excite gate [N, C, 1, 1], a
  // per-channel scale): s is cast down instead of x being cast up, one pass
  // over a few values against two over x (up for the product, down again for
  // the lowered op that reads it), and the product is rounded to bf16 once
  // more than before (x is bf16 already; bf16 keeps float32's exponent range,
  // so no value overflows). Only aten::mul, out of place, and only to bf16:
  // an add of a float32 mask (finfo.min) could round to -inf, and fp16's
  // range is narrower.
  bool scalesByBroadcastFactor(const ir::Node* n, const std::vector<Input>& strong) {
    if (cfg_.target != c10::ScalarType::BFloat16 || !n->is("aten::mul") || n->overload() != "Tensor" ||
        strong.size() != 2)
      return false;
    const ir::Value* a = strong[0].value();
    const ir::Value* b = strong[1].value();
    if (state(a).lowered == state(b).lowered) return false;
    const ir::Value* big = state(a).lowered ? a : b;
    const ir::Value* small = state(a).lowered ? b : a;
    if (!isFloat32(small)) return false;
    const auto bigCount = knownNumel(big), smallCount = knownNumel(small);
    return bigCount && smallCount && *smallCount * 16 <= *bigCount;
  }

  // Follow (first float input leads) and Promote (widest wins).
  void visitElementwise(ir::Node* n, OpPrecision cls) {
    const auto inputs = tensorInputs(n);
    std::vector<Input> strong, weak;
    for (const Input& in : inputs) {
      const ir::Value* v = in.value();
      if (!floatOrUnknown(v) && !state(v).lowered) continue;  // integer / bool / float64: untouched
      (state(v).weak ? weak : strong).push_back(in);
    }
    bool low = false, byFactor = false;
    if (!strong.empty() && n->numOutputs() == 1) {
      if (cls == OpPrecision::Follow) {
        low = state(strong[0].value()).lowered;
        for (size_t i = 1; i < strong.size() && low; ++i) {
          const auto& s = state(strong[i].value());
          low = s.lowered || s.original == kFloat;  // an unknown dtype must not be cast
        }
      } else {
        low = true;
        for (const Input& in : strong) low = low && state(in.value()).lowered;
        byFactor = !low && scalesByBroadcastFactor(n, strong);
        low = low || byFactor;
      }
    }
    if (low && !checkWeakConversions(n, weak, /*count=*/false).empty()) low = false;
    if (low && byFactor) ++broadcastFactors_;
    if (low) {
      for (const Input& in : inputs)
        if (state(in.value()).lowered || isFloat32(in.value())) lower(in);
      if (n->output()->isTensor()) markLowered(n->output());
      splitWithoutLowPrecisionKernel(n);
      return;
    }
    for (const Input& in : inputs) restore(in);
    std::optional<c10::ScalarType> inferred;
    if (!inputs.empty()) {
      inferred = state(inputs[0].value()).original;
      if (cls == OpPrecision::Promote)
        for (const Input& in : inputs) {
          const auto& o = state(in.value()).original;
          inferred = (inferred && o) ? std::optional<c10::ScalarType>(c10::promoteTypes(*inferred, *o)) : std::nullopt;
        }
    }
    setOutputsOriginal(n, inferred);
    if (n->numOutputs() == 1 && strong.empty() && !weak.empty() && isFloat32(n->output()))
      state(n->output()).weak = true;  // arithmetic on constants stays a constant
  }

  void visitFactory(ir::Node* n) {
    std::optional<c10::ScalarType> dtype;
    const ir::Literal* d = literalArg(n, "dtype");
    if (d && d->is<c10::ScalarType>()) dtype = d->as<c10::ScalarType>();
    else if (d && d->isNone()) {
      static const std::set<std::string> kDefaultFloat = {"aten::zeros", "aten::ones", "aten::empty", "aten::rand",
                                                          "aten::randn", "aten::eye"};
      if (kDefaultFloat.count(n->target())) dtype = kFloat;
    }
    // A `like` tensor argument only gives shape and device: no cast needed.
    setOutputsOriginal(n, dtype);
    if (n->numOutputs() == 1 && isFloat32(n->output()) && d && !cfg_.emulate) {
      state(n->output()).weak = true;
      values_.addFactory(n);
    }
  }

  // `x.to(dtype)`, `x.to(other)`, `x.type_as(other)`.
  void visitTo(ir::Node* n) {
    const auto to = ir::ToOp::match(n);
    ir::Value* x = to->self();
    ir::Value* out = n->output();
    if (!x) return setOutputsOriginal(n, std::nullopt);
    const auto& sx = state(x);
    // A dtype from another tensor: follows it at run time.
    if (n->is("aten::type_as") || n->overload() == "other") {
      ir::Value* other = to->other();
      if (!other) {
        restoreAll(n);
        return setOutputsOriginal(n, std::nullopt);
      }
      const ValueState so = state(other);
      if (so.lowered) return markLowered(out);
      setOutputsOriginal(n, so.original);
      return;
    }
    const ir::Literal* d = to->literal("dtype");
    const bool hasDtypeArg = to->has("dtype");
    if (hasDtypeArg && !d) {  // a dtype computed at run time
      restoreAll(n);
      return setOutputsOriginal(n, std::nullopt);
    }
    if (!d || d->isNone()) {  // a device or memory-format change: follows x
      if (sx.lowered) return markLowered(out);
      return setOutputsOriginal(n, sx.original);
    }
    const c10::ScalarType dtype = d->as<c10::ScalarType>();
    if (dtype == kFloat && sx.lowered) {
      // A no-op in the original (float32 to float32): keep the precision.
      if (!cfg_.emulate) {
        rw_.setArg(n, to->index("dtype"), ir::Literal(cfg_.target));
        ++literals_;
      }
      return markLowered(out);
    }
    // Any other conversion reads x as it is (to() converts from any dtype).
    setOutputsOriginal(n, dtype);
  }

  void visitInPlace(ir::Node* n) {
    ir::Value* self = n->arg(kWrittenArg).value();
    const bool low = state(self).lowered;
    // An in-place op the table keeps in fp32 (silu_ on a CPU target) writing
    // the fresh result of a lowered op that nothing else reads: it runs on an
    // fp32 copy instead, since nobody can see that the bf16 tensor is not
    // written.
    if (low && listed(n) && cfg_.policy.classify(*n) == OpPrecision::Fp32 && self->uses().size() == 1 &&
        self->node() && cfg_.policy.classify(*self->node()) == OpPrecision::LowPrecision && !cfg_.emulate) {
      const c10::ScalarType original = state(self).original.value_or(kFloat);
      rw_.setArg(n, kWrittenArg, values_.cast(self, original, n, /*lowered=*/false));
      setOutputsOriginal(n, original);
      ++fp32Kept_;
      return;
    }
    for (const Input& in : tensorInputs(n)) {
      if (in.owner == n && in.index == kWrittenArg) continue;
      ir::Value* v = in.value();
      if (low && (isFloat32(v) || state(v).lowered)) {
        if (!checkWeakConversions(n, {in}, false).empty()) continue;  // mixed, in-place ops convert on write
        lower(in);
      } else if (!low) {
        restore(in);
      }
    }
    if (low) {
      for (const auto& out : n->outputs())
        if (out->isTensor()) markLowered(out.get());
      splitWithoutLowPrecisionKernel(n);
    } else {
      setOutputsOriginal(n, state(self).original);
    }
  }

  // `_add_relu` has no fp16/bf16 kernel (LibTorch 1.13 and 2.x): in low
  // precision it becomes add then an in-place relu on the fresh sum.
  void splitWithoutLowPrecisionKernel(ir::Node* n) {
    if (cfg_.emulate || !(n->is("aten::_add_relu") || n->is("aten::_add_relu_")) || n->overload() != "Tensor" ||
        n->numArgs() != 3)
      return;
    const bool inPlace = n->is("aten::_add_relu_");
    // add(self, other, alpha) takes _add_relu's arguments as they are.
    ir::Value* sum = rw_.call(n, inPlace ? "aten::add_.Tensor" : "aten::add.Tensor", n->args());
    ir::Value* out = rw_.call(n, "aten::relu_", {sum});
    for (ir::Value* v : {sum, out}) {
      rw_.setMeta(v, n->output()->meta());
      markLowered(v);
    }
    if (mutation_.mayBeWritten(n->output())) values_.noteWritten(sum), values_.noteWritten(out);
    out->node()->setScope(n->scope());
    sum->node()->setScope(n->scope());
    rw_.replace(n, out);
    ++split_;
  }

  // ------------------------------------------------------------ conversions

  // Why a weak constant input cannot be converted (fp16 range), or "".
  std::string checkWeakConversions(ir::Node* n, const std::vector<Input>& inputs, bool count) {
    if (cfg_.target != c10::ScalarType::Half) return "";
    for (const Input& in : inputs) {
      ir::Value* v = in.value();
      if (!state(v).weak) continue;
      auto t = constantTensor(v);
      if (!t || t->scalar_type() != kFloat || t->numel() == 0) continue;
      const double maxAbs = t->abs().max().item<double>();
      if (maxAbs <= kFp16Max || cfg_.clamp) continue;
      if (count) ++outOfRange_;
      return fmt::format("weight {} is outside the fp16 range (max |w| = {:g} > 65504); clamp=true converts it clamped",
                         v->node()->target(), maxAbs);
    }
    return "";
  }

  void lower(const Input& in) {
    ir::Value* v = in.value();
    if (state(v).lowered) return;
    rw_.setArg(in.owner, in.index, values_.toLow(v, in.owner));
  }

  ir::Graph& g_;
  PassContext& ctx_;
  std::string pass_;
  Config cfg_;
  ir::MutationAnalysis mutation_;
  ir::Rewriter rw_;  // every edit goes through it (ir/rewriter.h)
  PassResult r_;
  CastValues values_;  // each value's state, and the conversions
  int64_t lowered_ = 0, literals_ = 0, fp32Kept_ = 0, outOfRange_ = 0, ioChanged_ = 0, split_ = 0, listsKept_ = 0;
  std::set<const ir::Value*> loweredLists_;  // split-like results whose pieces stay low (visitPieces)
  int64_t broadcastFactors_ = 0;  // float32 factors cast down to scale a lowered tensor
};

}  // namespace

PassResult assignPrecisions(ir::Graph& graph, PassContext& ctx, const std::string& pass, CastAssignment config) {
  return Caster(graph, ctx, pass, std::move(config)).run();
}

}  // namespace ptopt::quant
