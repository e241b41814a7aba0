// int8 in a torch.export program (see pt2_int8.h).
#include "ir/pt2_int8.h"

#include "ir/interpreter.h"  // callOperator
#include "ir/op_views.h"
#include "ir/qdq_ops.h"
#include "ir/rewriter.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace ptopt::ir {

namespace {

const std::string kQuantize = std::string(kQdqNamespace) + "::quantize_per_tensor";
const std::string kDequantize = std::string(kQdqNamespace) + "::dequantize_per_tensor";
const std::string kDequantizeChannels = std::string(kQdqNamespace) + "::dequantize_per_channel";

// A quantized tensor of the TorchScript graph, as the program holds it.
struct Quantized {
  Value* uint8;
  double scale;
  int64_t zeroPoint;
};

[[noreturn]] void cannot(const Node* n, const std::string& why) {
  const std::string where = n->sourceLocation().empty() ? "" : " (" + n->sourceLocation() + ")";
  throw std::invalid_argument("cannot write the int8 op " + n->qualifiedTarget() + where +
                              " as a torch.export program: " + why +
                              "; write TorchScript for it (--to torchscript, or an OUT ending in .pt)");
}

// An unpack op's results (weight, bias); ir::callOperator gives the first only.
std::vector<c10::IValue> unpack(const char* op, c10::IValue arg) {
  auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(op, "");
  std::vector<c10::IValue> stack{std::move(arg)};
  handle.callBoxed(&stack);
  return stack;
}

class Lowering {
 public:
  explicit Lowering(Model& m) : g_(m.forward()), rw_(g_, nullptr, "pt2-int8") {}

  int64_t run() {
    const auto nodes = g_.block()->nodes();
    for (Node* n : nodes) lower(n);
    // The TorchScript int8 nodes, users before producers (quantized:: ops are
    // opaque to dead code elimination: erased here by name), then the packed
    // weights nobody reads.
    for (auto it = replaced_.rbegin(); it != replaced_.rend(); ++it) {
      Node* n = *it;
      std::vector<Value*> inputs;
      for (const Arg& a : n->args())
        if (a.isValue()) inputs.push_back(a.value());
      for (const auto& out : n->outputs())
        if (out->hasUses()) cannot(n, "its result is still read by an op the lowering does not know");
      rw_.erase(n);
      for (Value* v : inputs)
        if (!v->hasUses() && v->node() && v->node()->opcode() == Opcode::GetAttr) rw_.erase(v->node());
    }
    return ops_;
  }

 private:
  Graph& g_;
  Rewriter rw_;
  std::unordered_map<const Value*, Quantized> q_;
  std::vector<Node*> replaced_;  // TorchScript int8 nodes, in graph order
  std::unordered_map<std::string, std::string> made_;  // constant() name -> the constant's
  int64_t ops_ = 0;

  const Quantized* quantizedOf(const Value* v) const {
    auto it = q_.find(v);
    return it == q_.end() ? nullptr : &it->second;
  }

  static double floatOf(const Node* n, const std::string& name) {
    auto v = OpView::of(const_cast<Node*>(n)).floatArg(name);
    if (!v) cannot(n, "its " + name + " is not a constant");
    return *v;
  }
  static int64_t intOf(const Node* n, const std::string& name) {
    auto v = OpView::of(const_cast<Node*>(n)).intArg(name);
    if (!v) cannot(n, "its " + name + " is not a constant");
    return *v;
  }

  // A float value's uint8 form with `scale`, `zp`, inserted before `before`.
  Quantized quantize(Value* x, double scale, int64_t zp, Node* before, const std::string& name) {
    Value* u8 = rw_.call(before, kQuantize, {x, scale, zp, int64_t(0), int64_t(255), c10::ScalarType::Byte});
    rw_.setName(u8, name + "_q");
    return {u8, scale, zp};
  }
  // One dequantize per reader, as PT2E writes it (Inductor's int8 patterns
  // match a dequantize with one user; an in-place reader gets its own copy).
  Value* dequantize(const Value* quantizedValue, Node* before) {
    const Quantized& q = q_.at(quantizedValue);
    Value* x = rw_.call(before, kDequantize, {q.uint8, q.scale, q.zeroPoint, int64_t(0), int64_t(255),
                                              c10::ScalarType::Byte, Literal()});
    rw_.setName(x, quantizedValue->name() + "_dq");
    return x;
  }
  Value* dequantizeArg(Node* n, const std::string& name) {
    Value* v = OpView::of(n).value(name);
    if (!v || !quantizedOf(v))
      cannot(n, "its " + name + (v ? " %" + v->name() + (v->node() ? " (from " + v->node()->qualifiedTarget() + ")" : "") : "") +
                    " is not a quantized tensor the program computes");
    return dequantize(v, n);
  }
  // `y` (float, computed for int8 node `n`) quantized with n's output
  // parameters stands for n's output from now on.
  void produces(Node* n, Value* y, double scale, int64_t zp) {
    q_[n->output()] = quantize(y, scale, zp, n, n->output()->name());
    ++ops_;
  }

  void lower(Node* n) {
    if (!n->isCall()) return;
    const std::string& t = n->target();
    if (n->is("aten::quantize_per_tensor") || n->is("aten::dequantize") || t.rfind("quantized::", 0) == 0)
      replaced_.push_back(n);
    if (n->is("aten::quantize_per_tensor")) {
      const OpView v = OpView::of(n);
      if (v.dtypeArg("dtype") != c10::ScalarType::QUInt8) cannot(n, "only quint8 activations have a form here");
      if (!v.value("self") || v.value("self")->type()->kind() != c10::TypeKind::TensorType)
        cannot(n, "it quantizes other than one tensor");
      q_[n->output()] = quantize(v.value("self"), floatOf(n, "scale"), intOf(n, "zero_point"), n, n->output()->name());
    } else if (n->is("aten::dequantize")) {
      if (!n->output()->isTensor()) cannot(n, "only a tensor's dequantize has a form here");
      // Built by the quantize pass without its overload name: its one argument.
      Value* self = n->numArgs() == 1 ? n->arg(0).value() : nullptr;
      if (!self || !quantizedOf(self)) cannot(n, "it dequantizes a tensor the program does not quantize");
      rw_.replaceAllUsesWith(n->output(), dequantize(self, n));
    } else if (t == "quantized::conv2d" || t == "quantized::conv2d_relu") {
      if (n->overload() != "new") cannot(n, "only the packed-parameter overload (.new) has a form here");
      lowerConv(n, t == "quantized::conv2d_relu", false);
    } else if (t == "quantized::conv1d" || t == "quantized::conv1d_relu") {
      lowerConv(n, t == "quantized::conv1d_relu", true);
    } else if (t == "quantized::linear" || t == "quantized::linear_relu") {
      lowerLinear(n, t == "quantized::linear_relu");
    } else if (t == "quantized::add" || t == "quantized::add_relu" || t == "quantized::mul") {
      if (!n->overload().empty()) cannot(n, "only the tensor-tensor overload has a form here");
      Value* a = dequantizeArg(n, "qa");
      Value* b = dequantizeArg(n, "qb");
      Value* y = t == "quantized::mul" ? rw_.call(n, "aten::mul.Tensor", {a, b})
                                       : rw_.call(n, "aten::add.Tensor", {a, b, int64_t(1)});
      if (t == "quantized::add_relu") y = rw_.call(n, "aten::relu", {y});
      produces(n, y, floatOf(n, "scale"), intOf(n, "zero_point"));
    } else if (t == "quantized::cat") {
      Value* list = OpView::of(n).value("qx");
      Node* lc = list ? list->node() : nullptr;
      if (!lc || !lc->is("prim::ListConstruct")) cannot(n, "its inputs are not a list the program builds");
      std::vector<Arg> items;
      for (const Arg& a : lc->args()) {
        if (!a.isValue() || !quantizedOf(a.value())) cannot(n, "an input is not a quantized tensor");
        items.emplace_back(dequantize(a.value(), n));
      }
      replaced_.insert(replaced_.end() - 1, lc);
      Value* floats = rw_.call(n, "prim::ListConstruct", items, c10::ListType::ofTensors());
      Value* y = rw_.call(n, "aten::cat", {floats, intOf(n, "dim")});
      produces(n, y, floatOf(n, "scale"), intOf(n, "zero_point"));
    } else if (t.rfind("quantized::", 0) == 0) {
      cannot(n, "it has no Q/DQ form here (dynamic int8 and RNN cells are written only as TorchScript)");
    } else {
      lowerReader(n);
    }
  }

  // An op that reads quantized tensors but is no int8 op: a size query (reads
  // the uint8 tensor), or an op run on a quantized tensor (dq -> op -> q).
  void lowerReader(Node* n) {
    bool reads = false;
    for (const Arg& a : n->args()) reads |= a.isValue() && quantizedOf(a.value());
    if (!reads) return;
    // The list a quantized::cat reads: lowered with the cat.
    if (n->is("prim::ListConstruct") && std::all_of(n->output()->uses().begin(), n->output()->uses().end(),
                                                    [](const Use& u) { return u.user->is("quantized::cat"); }))
      return;
    const OpView v = OpView::of(n);
    if (n->is("aten::size") || n->is("aten::dim")) {
      rw_.setArg(n, v.index("self"), q_.at(v.value("self")).uint8);
      return;
    }
    Value* self = v.has("self") ? v.value("self") : nullptr;
    const Quantized* in = self ? quantizedOf(self) : nullptr;
    size_t quantizedArgs = 0;
    for (const Arg& a : n->args()) quantizedArgs += a.isValue() && quantizedOf(a.value());
    if (!in || quantizedArgs != 1 || n->numOutputs() != 1 || !n->output()->isTensor())
      cannot(n, "it reads a quantized tensor other than as the one input of a pass-through op");
    rw_.setArg(n, v.index("self"), dequantize(self, n));
    // The int8 kernel of hardsigmoid gives its output a fixed quantization.
    const bool hardsigmoid = n->is("aten::hardsigmoid") || n->is("aten::hardsigmoid_");
    Node* after = n->next();
    Quantized out = quantize(n->output(), hardsigmoid ? 1.0 / 256 : in->scale, hardsigmoid ? 0 : in->zeroPoint,
                             after, n->output()->name());
    // Readers of n's output read the quantized form from here on.
    q_[n->output()] = out;
  }

  // A constant made from a packed weight, named after it: made once, and
  // read again where the same packed weight is (one module called at
  // several places shares one, quantize's packed-shared).
  template <typename Make>
  Value* constant(const std::string& name, Make make, Node* before) {
    if (auto it = made_.find(name); it != made_.end()) return rw_.getAttr(it->second, c10::TensorType::get(), before);
    Value* v = rw_.addConstant(name, make(), before);
    made_[name] = v->node()->target();
    return v;
  }

  // The int8 weight and its per-channel parameters as constants; the
  // dequantized weight value.
  Value* weight(Node* n, const at::Tensor& w, const std::string& base) {
    if (w.qscheme() != at::kPerChannelAffine && w.qscheme() != at::kPerChannelSymmetric &&
        w.qscheme() != at::kPerTensorAffine && w.qscheme() != at::kPerTensorSymmetric)
      cannot(n, "its weight's quantization scheme has no Q/DQ form");
    if (w.scalar_type() != at::kQInt8) cannot(n, "its weight is not qint8");
    Value* wi8 = constant(base + "_int8", [&] { return w.int_repr().contiguous(); }, n);
    if (w.qscheme() == at::kPerTensorAffine || w.qscheme() == at::kPerTensorSymmetric)
      return rw_.call(n, kDequantize, {wi8, w.q_scale(), w.q_zero_point(), int64_t(-128), int64_t(127),
                                       c10::ScalarType::Char, Literal()});
    Value* scales = constant(base + "_scale", [&] { return w.q_per_channel_scales().to(at::kFloat).contiguous(); }, n);
    Value* zps = constant(base + "_zero_point", [&] { return w.q_per_channel_zero_points().to(at::kLong).contiguous(); }, n);
    return rw_.call(n, kDequantizeChannels, {wi8, scales, zps, w.q_per_channel_axis(), int64_t(-128), int64_t(127),
                                             c10::ScalarType::Char, Literal()});
  }

  const c10::IValue& packedOf(Node* n, const std::string& name, std::string& base) const {
    Value* p = OpView::of(n).value(name);
    if (!p || !p->node() || p->node()->opcode() != Opcode::GetAttr)
      cannot(n, "its packed weight is not a constant");
    base = p->node()->target();
    if (base.size() > 7 && base.compare(base.size() - 7, 7, "_packed") == 0) base.resize(base.size() - 7);
    return g_.constants().at(p->node()->target());
  }

  Value* bias(Node* n, const c10::IValue& b, const std::string& base) {
    if (b.isNone()) return nullptr;
    return constant(base + "_bias", [&] { return b.toTensor().to(at::kFloat).contiguous(); }, n);
  }

  // quantized::conv1d keeps its weight in 2-d packed parameters (a unit
  // height): its 3-d weight comes from conv1d_unpack, its stride, padding
  // and dilation are the last of the 2-d ones.
  void lowerConv(Node* n, bool relu, bool conv1d) {
    std::string base;
    const c10::IValue& packed = packedOf(n, "packed_weight", base);
    const auto unpacked = unpack(conv1d ? "quantized::conv1d_unpack" : "quantized::conv2d_unpack", packed);
    const at::Tensor w = unpacked.at(0).toTensor();
    if (w.dim() != (conv1d ? 3 : 4)) cannot(n, "its weight is not " + std::string(conv1d ? "3" : "4") + "-d");
    if (callOperator("quantized::conv2d_transpose", "", {packed}).toInt() != 0)
      cannot(n, "a transposed int8 convolution has no form here");
    Value* x = dequantizeArg(n, "qx");
    Value* wd = weight(n, w, base);
    Value* b = bias(n, unpacked.at(1), base);
    auto ints = [&](const char* op) {
      std::vector<int64_t> v = callOperator(op, "", {packed}).toIntVector();
      if (conv1d && v.size() == 2) v.erase(v.begin());
      return v;
    };
    Value* y = rw_.call(n, conv1d ? "aten::conv1d" : "aten::conv2d",
                        {x, wd, b ? Arg(b) : Arg(Literal()), ints("quantized::conv2d_stride"),
                         ints("quantized::conv2d_padding"), ints("quantized::conv2d_dilation"),
                         callOperator("quantized::conv2d_groups", "", {packed}).toInt()});
    if (relu) y = rw_.call(n, "aten::relu", {y});
    produces(n, y, floatOf(n, "output_scale"), intOf(n, "output_zero_point"));
  }

  void lowerLinear(Node* n, bool relu) {
    std::string base;
    const c10::IValue& packed = packedOf(n, "W_prepack", base);
    const auto unpacked = unpack("quantized::linear_unpack", packed);
    Value* x = dequantizeArg(n, "X");
    Value* wd = weight(n, unpacked.at(0).toTensor(), base);
    Value* b = bias(n, unpacked.at(1), base);
    Value* y = rw_.call(n, "aten::linear", {x, wd, b ? Arg(b) : Arg(Literal())});
    if (relu) y = rw_.call(n, "aten::relu", {y});
    produces(n, y, floatOf(n, "Y_scale_i"), intOf(n, "Y_zero_point_i"));
  }
};

}  // namespace

bool hasQuantizedOps(const Graph& g) {
  for (Node* n : *g.block())
    if (n->isCall() && (n->target().rfind("quantized::", 0) == 0 || n->is("aten::quantize_per_tensor") ||
                        n->is("aten::quantize_per_channel")))
      return true;
  return false;
}

int64_t lowerInt8ForPt2(Model& m) { return Lowering(m).run(); }

}  // namespace ptopt::ir
