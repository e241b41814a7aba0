#include "quant/int8_rewrite.h"

#include "ir/interpreter.h"
#include "ir/op_views.h"
#include "rewriters/constants.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::quant {

using namespace rewriters;

namespace {

// Ops that run on a quantized tensor and give a quantized one: with its
// quantization, or (hardsigmoid) the kernel's fixed one (scale 1/256).
bool isPassThrough(const ir::Node* n) {
  static const std::set<std::string> ops = {"aten::relu", "aten::relu_", "aten::hardtanh", "aten::hardtanh_",
                                            "aten::max_pool2d", "aten::avg_pool2d", "aten::adaptive_avg_pool2d",
                                            "aten::flatten", "aten::reshape", "aten::contiguous",
                                            "aten::hardsigmoid", "aten::hardsigmoid_"};
  if (!n->isCall() || n->numOutputs() != 1 || !ir::OpView::of(const_cast<ir::Node*>(n)).value("self")) return false;
  if (ops.count(n->target())) return true;
  // A squeeze-excite's pooling: mean over dims, no dtype change.
  if (n->is("aten::mean") && n->overload() == "dim") {
    const ir::Literal* dtype = ir::OpView::of(const_cast<ir::Node*>(n)).literal("dtype");
    return !ir::OpView::of(const_cast<ir::Node*>(n)).has("dtype") || (dtype && dtype->isNone());
  }
  return false;
}

std::string baseName(ir::Value* weight, const std::string& fallback) {
  if (weight && weight->node() && weight->node()->opcode() == ir::Opcode::GetAttr) return weight->node()->target();
  return fallback;
}

// What a packed weight is made of, when its weight (and bias) are named
// constants: the kind, their names and the conv's geometry. "" otherwise.
std::string packedKey(const Int8Candidate& c, ir::Node* n, ir::Value* weight, ir::Value* bias) {
  auto constantName = [](ir::Value* v) -> std::optional<std::string> {
    if (!v) return std::string("None");
    if (v->node() && v->node()->opcode() == ir::Opcode::GetAttr) return v->node()->target();
    return std::nullopt;
  };
  const auto w = constantName(weight), b = constantName(bias);
  if (!w || !b) return "";
  std::string key = c.kindName.substr(0, c.kindName.find('_')) + "|" + *w + "|" + *b;
  if (c.kind == Int8Kind::Conv) {
    const auto conv = *ir::ConvOp::match(n);
    auto ints = [](const std::vector<int64_t>& v) {
      std::string s;
      for (int64_t x : v) s += std::to_string(x) + ",";
      return s;
    };
    key += "|" + ints(*conv.stride()) + "|" + ints(*conv.padding()) + "|" + ints(*conv.dilation()) + "|" +
           std::to_string(conv.groups());
  }
  return key;
}

}  // namespace

BuildResult buildInt8(ir::Graph& g, const std::vector<Int8Candidate>& cands, const std::set<size_t>& fp32,
                  const std::map<std::string, QParams>& qparams, ir::EditLog* log, const std::string& pass,
                  bool reduceRange, RnnWeights rnnWeights) {
  ir::Rewriter rw(g, log, pass);
  BuildResult res;
  std::unordered_map<const ir::Node*, size_t> candOf;
  std::unordered_set<const ir::Node*> fusedActs;
  for (size_t i = 0; i < cands.size(); ++i) {
    candOf[cands[i].op] = i;
    if (cands[i].act) fusedActs.insert(cands[i].act);
  }
  std::unordered_map<ir::Value*, ir::Value*> qOf;  // float value -> its quantized source
  std::unordered_map<std::string, std::string> packedByKey;  // packedKey -> the packed constant's name
  std::vector<ir::Node*> dequantizes;
  auto qp = [&](const ir::Value* v) {
    auto it = qparams.find(v->name());
    if (it == qparams.end()) throw std::logic_error("quantize: no observer for %" + v->name());
    return it->second;
  };
  auto quantized = [&](ir::Value* x, ir::Node* before) -> ir::Value* {
    if (auto it = qOf.find(x); it != qOf.end()) return it->second;
    const QParams q = qp(x);
    ir::Value* qx = rw.call(before, "aten::quantize_per_tensor",
                            {x, q.scale, q.zeroPoint, ir::Literal(c10::ScalarType::QUInt8)});
    rw.setName(qx, x->name() + "_q");
    qOf[x] = qx;
    ++res.entries;
    return qx;
  };
  // Replaces the float result `out` (computed by nodes `erase`) with
  // dequantize(qv) and erases them.
  auto finish = [&](ir::Value* out, ir::Value* qv, ir::Node* before, const std::vector<ir::Node*>& erase) {
    ir::Value* dq = rw.call(before, "aten::dequantize", {qv});
    rw.setMeta(dq, out->meta());
    const std::string name = out->name();
    res.quantizedByName[name] = qv;
    rw.replaceAllUsesWith(out, dq);
    for (auto it = erase.rbegin(); it != erase.rend(); ++it) {
      std::vector<ir::Value*> inputs;
      for (const auto& a : (*it)->args())
        if (a.isValue()) inputs.push_back(a.value());
      rw.erase(*it);
      for (ir::Value* v : inputs) {
        if (!v->hasUses() && v->node() && v->node()->opcode() == ir::Opcode::GetAttr) rw.erase(v->node());
      }
    }
    rw.setName(dq, name);
    qOf[dq] = qv;
    dequantizes.push_back(dq->node());
  };

  const auto nodes = g.block()->nodes();
  for (ir::Node* n : nodes) {
    if (fusedActs.count(n)) continue;
    auto ci = candOf.find(n);
    if (ci != candOf.end()) {
      const size_t idx = ci->second;
      const Int8Candidate& c = cands[idx];
      if (fp32.count(idx)) continue;
      // An add or cat is worth int8 only inside a region: when an input is
      // int8 already; a mul (a gate) when both are.
      if (c.kind == Int8Kind::Add || c.kind == Int8Kind::Cat || c.kind == Int8Kind::Mul) {
        const std::vector<ir::Value*> xs = addOrCatInputs(n);
        auto isQuantized = [&](ir::Value* x) { return qOf.count(x) != 0; };
        if (c.kind == Int8Kind::Mul ? !std::all_of(xs.begin(), xs.end(), isQuantized)
                                    : !std::any_of(xs.begin(), xs.end(), isQuantized))
          continue;
      }
      if (c.kind == Int8Kind::Rnn) {  // float in, float out: no region boundary
        res.quantizedOut[idx] = buildDynamicRnn(rw, n, reduceRange, rnnWeights);
        ++res.quantized;
        ++res.rnn;
        continue;
      }
      ir::Node* last = c.act ? c.act : n;
      ir::Node* before = last->next();
      std::vector<ir::Node*> erase = {n};
      if (c.act) erase.push_back(c.act);
      ir::Value* qv = nullptr;
      if (c.kind == Int8Kind::Conv || c.kind == Int8Kind::Linear || c.kind == Int8Kind::LinearDynamic) {
        ir::Value *input, *weight, *bias;
        at::Tensor w;
        if (c.kind == Int8Kind::Conv) {
          auto conv = *ir::ConvOp::match(n);
          input = conv.input(), weight = conv.weight(), bias = conv.bias();
        } else {
          auto lin = *ir::LinearOp::match(n);
          input = lin.input(), weight = lin.weight(), bias = lin.bias();
        }
        w = *constantTensor(weight);
        // A module called at several places (a shared head, ALBERT's layers)
        // reads one weight there: one packed attribute serves them all.
        const std::string packKey = packedKey(c, n, weight, bias);
        ir::Value* pv = nullptr;
        if (auto it = packedByKey.find(packKey); !packKey.empty() && it != packedByKey.end()) {
          pv = rw.getAttr(it->second, g.constants().at(it->second).type(), before);
          ++res.packedShared;
        } else {
          std::optional<at::Tensor> b;
          if (bias) b = constantTensor(bias)->to(at::kFloat).contiguous();
          at::Tensor wq = quantizeWeightPerChannel(w);
          c10::IValue packed;
          if (c.kind == Int8Kind::Conv) {
            auto conv = *ir::ConvOp::match(n);
            packed = ir::callOperator(w.dim() == 3 ? "quantized::conv1d_prepack" : "quantized::conv2d_prepack", "",
                                      {wq, b ? c10::IValue(*b) : c10::IValue(), *conv.stride(), *conv.padding(),
                                       *conv.dilation(), conv.groups()});
          } else {
            packed = ir::callOperator("quantized::linear_prepack", "", {wq, b ? c10::IValue(*b) : c10::IValue()});
          }
          pv = rw.addConstant(baseName(weight, "quantized") + "_packed", packed, packed.type(), before);
          if (!packKey.empty()) packedByKey[packKey] = pv->node()->target();
        }
        if (c.kind == Int8Kind::LinearDynamic) {
          ir::Value* y = rw.call(before, "quantized::linear_dynamic", {input, pv, reduceRange});
          rw.setMeta(y, c.out->meta());
          const std::string outName = c.out->name();
          rw.replaceAllUsesWith(c.out, y);
          rw.erase(n);
          if (!weight->hasUses()) rw.erase(weight->node());
          if (bias && !bias->hasUses()) rw.erase(bias->node());
          rw.setName(y, outName);
          res.quantizedOut[idx] = y;
          ++res.quantized;
          continue;
        }
        const QParams q = qp(c.out);
        ir::Value* qx = quantized(input, before);
        const bool conv1d = c.kind == Int8Kind::Conv && w.dim() == 3;
        std::string target = c.kind != Int8Kind::Conv ? "quantized::linear" : conv1d ? "quantized::conv1d" : "quantized::conv2d";
        if (c.act) target += "_relu";
        if (c.kind == Int8Kind::Conv && !conv1d) target += ".new";  // conv1d has one overload, with the packed params
        qv = rw.call(before, target, {qx, pv, q.scale, q.zeroPoint});
      } else if (c.kind == Int8Kind::Add) {
        const QParams q = qp(c.out);
        const auto add = ir::AddOp::match(n);
        ir::Value* qa = quantized(add->self(), before);
        ir::Value* qb = quantized(add->other(), before);
        const bool relu = c.kindName == "add_relu";
        qv = rw.call(before, relu ? "quantized::add_relu" : "quantized::add", {qa, qb, q.scale, q.zeroPoint});
      } else if (c.kind == Int8Kind::Mul) {
        const QParams q = qp(c.out);
        const ir::OpView mul = ir::OpView::of(n);
        qv = rw.call(before, "quantized::mul", {quantized(mul.value("self"), before),
                                                 quantized(mul.value("other"), before), q.scale, q.zeroPoint});
      } else if (c.kind == Int8Kind::Cat) {
        const QParams q = qp(c.out);
        const auto cat = ir::CatOp::match(n);
        ir::Node* lc = cat->tensors()->node();
        std::vector<ir::Arg> items;
        for (const auto& a : lc->args()) items.emplace_back(quantized(a.value(), before));
        ir::Value* list = rw.call(before, "prim::ListConstruct", items, c10::ListType::ofTensors());
        qv = rw.call(before, "quantized::cat", {list, cat->dimArg(), q.scale, q.zeroPoint});
        erase.insert(erase.begin(), lc);
      }
      rw.setName(qv, c.out->name() + "_int8");
      res.quantizedOut[idx] = qv;
      ++res.quantized;
      finish(c.out, qv, before, erase);
      continue;
    }
    // Shape queries read the quantized tensor (no dequantize needed for them).
    if (n->is("aten::size") || n->is("aten::dim")) {
      const ir::OpView query = ir::OpView::of(n);
      if (ir::Value* self = query.value("self"))
        if (auto it = qOf.find(self); it != qOf.end()) rw.setArg(n, query.index("self"), it->second);
      continue;
    }
    if (isPassThrough(n)) {
      const size_t selfIndex = ir::OpView::of(n).index("self");
      ir::Value* x = n->argValue(selfIndex);
      auto it = qOf.find(x);
      if (it == qOf.end()) continue;
      const bool inPlace = n->target().back() == '_';
      if (inPlace && !isOnlyUser(x, n)) continue;
      std::vector<ir::Arg> args = n->args();
      args[selfIndex] = it->second;
      std::string target = n->qualifiedTarget();
      if (inPlace) target = n->target().substr(0, n->target().size() - 1);
      ir::Node* before = n->next();
      ir::Value* qv = rw.call(before, target, args);
      rw.setName(qv, n->output()->name() + "_int8");
      finish(n->output(), qv, before, {n});
    }
  }
  // Dequantizes nobody reads.
  for (auto it = dequantizes.rbegin(); it != dequantizes.rend(); ++it) {
    if ((*it)->output()->hasUses()) ++res.exits;
    else rw.erase(*it);
  }
  return res;
}

}  // namespace ptopt::quant
