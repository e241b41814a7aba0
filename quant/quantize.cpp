#include "quant/quantize.h"

#include "ir/interpreter.h"
#include "ir/model.h"
#include "ir/mutation.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "quant/calibration.h"
#include "quant/int8_engine.h"
#include "quant/observers.h"
#include "quant/quantize_rnn.h"
#include "rewriters/constants.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::quant {

using namespace rewriters;

std::vector<OptionSpec> QuantizePass::optionSpecs() const {
  return {
      {"dtype", OptionKind::Enum, "int8", "integer type (int8: qint8 weights, quint8 activations)", {"int8"}, {}, {}},
      {"mode", OptionKind::Enum, "static",
       "static: calibrated activations (LSTM/GRU dynamic); dynamic: linear_dynamic, LSTM/GRU",
       {"static", "dynamic"}, {}, {}},
      {"observer", OptionKind::Enum, "histogram", "activation range: minmax, histogram (error-minimizing clip), "
       "percentile", {"minmax", "histogram", "percentile"}, {}, {}},
      {"percentile", OptionKind::Float, "99.99", "observer=percentile: the percentile kept", {}, 90.0, 100.0},
      {"min-cosine", OptionKind::Float, "0.99", "accuracy guard: worst output cosine vs fp32 on held-out batches",
       {}, -1.0, 1.0},
      {"fallback", OptionKind::Bool, "true", "keep the most sensitive ops in fp32 until min-cosine holds", {}, {}, {}},
      {"max-fallback", OptionKind::Int, "-1", "most ops the fallback may keep in fp32 (-1: half the convs and "
       "linears); past it the pass declines", {}, -1, {}},
      {"rnn-weights", OptionKind::Enum, "auto", "LSTM/GRU weights: per-tensor (torch.ao's, the faster kernel), "
       "per-channel, or auto (per-tensor unless a row would use under 16 levels)",
       {"auto", "per-tensor", "per-channel"}, {}, {}},
      {"random-batches", OptionKind::Int, "8", "batches drawn when no calibration data is given", {}, 1, {}},
      {"fp32-ops", OptionKind::String, "", "ops to keep in fp32: output value names or operators ('%x.3;aten::linear')",
       {}, {}, {}},
  };
}

namespace {

enum class Kind { Conv, Linear, Add, Cat, LinearDynamic, Rnn };

// Ops that compute (worth quantizing on their own); adds and cats only join regions.
bool isCompute(Kind k) { return k == Kind::Conv || k == Kind::Linear || k == Kind::LinearDynamic || k == Kind::Rnn; }

struct Candidate {
  Kind kind;
  ir::Node* op = nullptr;
  ir::Node* act = nullptr;  // fused relu / hardtanh (its output is `out`)
  ir::Value* out = nullptr;
  std::string label, kindName;
};

bool isFloatTensor(const ir::Value* v) {
  if (!v || !v->isTensor()) return false;
  const auto& d = v->meta().dtype;
  return !d || *d == c10::ScalarType::Float;
}

bool onlyUser(const ir::Value* v, const ir::Node* n) {
  for (const auto& u : v->uses())
    if (u.user != n) return false;
  return !v->uses().empty();
}

// relu / relu_ / hardtanh(0, v) / hardtanh_ (the only user of `v`).
ir::Node* fusableActivation(ir::Value* v) {
  if (v->uses().size() != 1) return nullptr;
  ir::Node* u = v->uses()[0].user;
  if (u->owningBlock() != v->node()->owningBlock() || v->uses()[0].argIndex != 0) return nullptr;
  if (u->is("aten::relu") || u->is("aten::relu_")) return u;
  if ((u->is("aten::hardtanh") || u->is("aten::hardtanh_")) && u->numArgs() == 3) {
    const auto bounds = ir::ClampOp::match(u)->bounds();
    if (bounds && bounds->first == 0.0 && bounds->second > 0) return u;
  }
  return nullptr;
}

bool sameKnownShape(const ir::Value* a, const ir::Value* b) {
  return a->meta().shape && b->meta().shape && *a->meta().shape == *b->meta().shape;
}

std::string describe(const ir::Node* n) { return "%" + n->output()->name() + " = " + n->target(); }

// The quantizable ops of the top-level block, in program order.
std::vector<Candidate> findCandidates(ir::Graph& g, bool dynamic, PassContext* ctx, const std::string& pass) {
  std::vector<Candidate> out;
  auto decline = [&](const ir::Node* n, const std::string& why) {
    if (ctx) ctx->decline(pass, n, why);
  };
  // LSTM / GRU are dynamic int8 in both modes (no static int8 kernel exists).
  std::optional<ir::MutationAnalysis> mutation;
  g.walk([&](ir::Node* n) {
    if (!isRnnOp(n)) return;
    if (n->owningBlock() != g.block()) decline(n, "inside control flow: left in fp32");
    else if (!mutation) mutation.emplace(g);
  });
  for (ir::Node* n : g.block()->nodes()) {
    if (!n->isCall()) continue;
    if (isRnnOp(n)) {
      const std::string why = rnnDeclineReason(n, *mutation);
      if (!why.empty()) { decline(n, why); continue; }
      out.push_back({Kind::Rnn, n, nullptr, n->output(), describe(n), n->target().substr(6) + "_dynamic"});
      continue;
    }
    if (dynamic) {
      if (auto lin = ir::LinearOp::match(n)) {
        auto w = constantTensor(lin->weight());
        if (!w || w->dim() != 2 || w->scalar_type() != at::kFloat) { decline(n, "weight is not a constant float matrix"); continue; }
        if (lin->bias() && !constantTensor(lin->bias())) { decline(n, "bias is not a constant"); continue; }
        out.push_back({Kind::LinearDynamic, n, nullptr, n->output(), describe(n), "linear_dynamic"});
      }
      continue;
    }
    Candidate c;
    c.op = n;
    if (auto conv = ir::ConvOp::match(n)) {
      auto w = constantTensor(conv->weight());
      if (conv->transposed()) { decline(n, "transposed conv: no int8 kernel used"); continue; }
      if (!w || w->dim() != 4 || w->scalar_type() != at::kFloat) { decline(n, "not a 2-D conv with a constant float weight"); continue; }
      if (conv->bias() && !constantTensor(conv->bias())) { decline(n, "bias is not a constant"); continue; }
      if (!conv->stride() || !conv->padding() || !conv->dilation()) { decline(n, "stride/padding/dilation are not int lists (padding='same'?)"); continue; }
      if (!isFloatTensor(conv->input())) { decline(n, "input is not float32"); continue; }
      c.kind = Kind::Conv;
      c.kindName = "conv2d";
    } else if (auto lin = ir::LinearOp::match(n)) {
      auto w = constantTensor(lin->weight());
      if (!w || w->dim() != 2 || w->scalar_type() != at::kFloat) { decline(n, "weight is not a constant float matrix"); continue; }
      if (lin->bias() && !constantTensor(lin->bias())) { decline(n, "bias is not a constant"); continue; }
      if (!isFloatTensor(lin->input())) { decline(n, "input is not float32"); continue; }
      c.kind = Kind::Linear;
      c.kindName = "linear";
    } else if (auto add = ir::AddOp::match(n)) {
      ir::Value* a = add->self();
      ir::Value* b = add->other();
      if (!a || !b) continue;
      if (!a->isTensor() || !b->isTensor() || !isFloatTensor(a) || !isFloatTensor(b)) continue;
      if (add->alpha() != 1.0) { decline(n, "alpha is not 1"); continue; }
      if (!sameKnownShape(a, b)) { decline(n, "operand shapes are unknown or differ (no broadcasting int8 add)"); continue; }
      if (add->inPlace() && !onlyUser(a, n)) { decline(n, "in-place add whose target has other users"); continue; }
      c.kind = Kind::Add;
      c.kindName = add->fusedRelu() ? "add_relu" : "add";
    } else if (auto cat = ir::CatOp::match(n)) {
      if (n->numArgs() != 2 || !cat->tensors() || !cat->dimArg().isLiteral()) continue;
      ir::Value* list = cat->tensors();
      ir::Node* lc = list->node();
      if (!lc || !lc->is("prim::ListConstruct") || list->uses().size() != 1) { decline(n, "its list is not built for it alone"); continue; }
      bool ok = lc->numArgs() > 0;
      for (const auto& a : lc->args()) ok = ok && a.isValue() && isFloatTensor(a.value()) && a.value()->isTensor();
      if (!ok) { decline(n, "cat of non-float or literal elements"); continue; }
      c.kind = Kind::Cat;
      c.kindName = "cat";
    } else {
      continue;
    }
    c.out = n->output();
    if (c.kind == Kind::Conv || c.kind == Kind::Linear || (c.kind == Kind::Add && c.kindName == "add")) {
      if (ir::Node* act = fusableActivation(n->output())) {
        const bool relu = act->target().find("relu") != std::string::npos;
        const bool inPlace = act->target().back() == '_';
        if (!(c.kind == Kind::Linear && !relu) && !(c.kind == Kind::Add && !relu) && (!inPlace || onlyUser(n->output(), act))) {
          c.act = act;
          c.out = act->output();
          c.kindName += "_relu";
        }
      }
    }
    c.label = describe(n);
    out.push_back(c);
  }
  return out;
}

// The tensors an add (self, other) or a cat (its list's elements) reads.
std::vector<ir::Value*> addOrCatInputs(ir::Node* n) {
  if (auto add = ir::AddOp::match(n)) return {add->self(), add->other()};
  std::vector<ir::Value*> xs;
  for (const auto& a : ir::CatOp::match(n)->tensors()->node()->args()) xs.push_back(a.value());
  return xs;
}

// Ops that run on a quantized tensor and keep its quantization.
bool isPassThrough(const ir::Node* n) {
  static const std::set<std::string> ops = {"aten::relu", "aten::relu_", "aten::hardtanh", "aten::hardtanh_",
                                            "aten::max_pool2d", "aten::avg_pool2d", "aten::adaptive_avg_pool2d",
                                            "aten::flatten", "aten::reshape", "aten::contiguous"};
  return n->isCall() && ops.count(n->target()) && ir::OpView::of(const_cast<ir::Node*>(n)).value("self") &&
         n->numOutputs() == 1;
}

c10::IValue callOp(const char* name, const char* overload, std::vector<c10::IValue> args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  torch::jit::Stack stack(std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  op.callBoxed(&stack);
  return stack.at(0);
}

std::string baseName(ir::Value* weight, const std::string& fallback) {
  if (weight && weight->node() && weight->node()->opcode() == ir::Opcode::GetAttr) return weight->node()->target();
  return fallback;
}

struct BuildResult {
  std::map<size_t, ir::Value*> quantizedOut;       // candidate index -> its quantized output
  std::map<std::string, ir::Value*> quantizedByName;  // original value name -> quantized value
  int64_t entries = 0, exits = 0, quantized = 0, rnn = 0;
};

struct Settings {
  bool reduceRange = false;
  ObserverKind observer = ObserverKind::Histogram;
  double percentile = 99.99;
};

// Rewrites `g` (its candidates `cands`, found on it) to int8, keeping the
// candidates in `fp32` in float.
BuildResult build(ir::Graph& g, const std::vector<Candidate>& cands, const std::set<size_t>& fp32,
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
      const Candidate& c = cands[idx];
      if (fp32.count(idx)) continue;
      // An add or cat is worth int8 only inside a region: when an input is int8 already.
      if (c.kind == Kind::Add || c.kind == Kind::Cat) {
        const std::vector<ir::Value*> xs = addOrCatInputs(n);
        const bool anyQuantized = std::any_of(xs.begin(), xs.end(), [&](ir::Value* x) { return qOf.count(x) != 0; });
        if (!anyQuantized) continue;
      }
      if (c.kind == Kind::Rnn) {  // float in, float out: no region boundary
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
      if (c.kind == Kind::Conv || c.kind == Kind::Linear || c.kind == Kind::LinearDynamic) {
        ir::Value *input, *weight, *bias;
        at::Tensor w;
        std::optional<at::Tensor> b;
        if (c.kind == Kind::Conv) {
          auto conv = *ir::ConvOp::match(n);
          input = conv.input(), weight = conv.weight(), bias = conv.bias();
        } else {
          auto lin = *ir::LinearOp::match(n);
          input = lin.input(), weight = lin.weight(), bias = lin.bias();
        }
        w = *constantTensor(weight);
        if (bias) b = constantTensor(bias)->to(at::kFloat).contiguous();
        at::Tensor wq = quantizeWeightPerChannel(w);
        c10::IValue packed;
        if (c.kind == Kind::Conv) {
          auto conv = *ir::ConvOp::match(n);
          packed = callOp("quantized::conv2d_prepack", "",
                          {wq, b ? c10::IValue(*b) : c10::IValue(), *conv.stride(), *conv.padding(), *conv.dilation(),
                           conv.groups()});
        } else {
          packed = callOp("quantized::linear_prepack", "", {wq, b ? c10::IValue(*b) : c10::IValue()});
        }
        ir::Value* pv = rw.addConstant(baseName(weight, "quantized") + "_packed", packed, packed.type(), before);
        if (c.kind == Kind::LinearDynamic) {
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
        std::string target = c.kind == Kind::Conv ? "quantized::conv2d" : "quantized::linear";
        if (c.act) target += "_relu";
        if (c.kind == Kind::Conv) target += ".new";
        qv = rw.call(before, target, {qx, pv, q.scale, q.zeroPoint});
      } else if (c.kind == Kind::Add) {
        const QParams q = qp(c.out);
        const auto add = ir::AddOp::match(n);
        ir::Value* qa = quantized(add->self(), before);
        ir::Value* qb = quantized(add->other(), before);
        const bool relu = c.kindName == "add_relu";
        qv = rw.call(before, relu ? "quantized::add_relu" : "quantized::add", {qa, qb, q.scale, q.zeroPoint});
      } else if (c.kind == Kind::Cat) {
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
      if (inPlace && !onlyUser(x, n)) continue;
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

// Float tensors of an output value, flattened out of tuples and lists.
void floatTensors(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    if (at::isFloatingType(v.toTensor().scalar_type())) out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) floatTensors(e, out);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) floatTensors(e, out);
  }
}

double cosine(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor x = a.detach().to(at::kDouble).reshape({-1}), y = b.detach().to(at::kDouble).reshape({-1});
  const double nx = x.norm().item<double>(), ny = y.norm().item<double>();
  if (nx == 0 && ny == 0) return 1.0;
  if (nx == 0 || ny == 0) return 0.0;
  return (x * y).sum().item<double>() / (nx * ny);
}

struct Evaluation {
  double cosine = 1;
  std::optional<double> top1;
  std::map<size_t, double> sqnr;     // candidate -> output SQNR
  std::map<size_t, double> inSqnr;   // candidate -> worst input SQNR
  std::set<size_t> quantized;        // candidates the build made int8
  std::string error;
};

std::vector<ir::Value*> tensorInputs(const Candidate& c) {
  std::vector<ir::Value*> xs;
  if (c.kind == Kind::Conv) xs.push_back(ir::ConvOp::match(c.op)->input());
  else if (c.kind == Kind::Linear || c.kind == Kind::LinearDynamic) xs.push_back(ir::LinearOp::match(c.op)->input());
  else if (c.kind == Kind::Rnn) xs.push_back(rnnSequenceInput(c.op));
  else xs = addOrCatInputs(c.op);
  return xs;
}

// Quantizes a copy of `g` keeping `fp32` in float and compares it with `g`
// on `batches`.
Evaluation evaluate(const ir::Graph& g, const std::set<size_t>& fp32, const std::map<std::string, QParams>& qparams,
                    const std::vector<std::vector<c10::IValue>>& batches, bool dynamic, bool reduceRange,
                    RnnWeights rnnWeights) {
  Evaluation ev;
  auto constants = std::make_shared<ir::ConstantTable>(g.constants());
  auto copy = ir::cloneGraph(g, constants);
  auto cands = findCandidates(*copy, dynamic, nullptr, "");
  auto origCands = findCandidates(const_cast<ir::Graph&>(g), dynamic, nullptr, "");
  // Names the comparison needs: candidate outputs and inputs.
  std::set<std::string> wanted;
  for (const auto& c : origCands) {
    wanted.insert(c.out->name());
    for (ir::Value* x : tensorInputs(c)) wanted.insert(x->name());
  }
  BuildResult built = build(*copy, cands, fp32, qparams, nullptr, "quantize", reduceRange, rnnWeights);
  std::unordered_map<const ir::Value*, std::string> quantizedNames;
  for (const auto& [name, v] : built.quantizedByName) quantizedNames[v] = name;
  for (const auto& [idx, v] : built.quantizedOut) {
    quantizedNames[v] = origCands[idx].out->name();
    ev.quantized.insert(idx);
  }
  std::map<std::string, std::pair<double, double>> power;  // name -> (signal, noise)
  double worstCos = 1;
  int64_t agree = 0, rows = 0;
  try {
    for (const auto& batch : batches) {
      std::unordered_map<std::string, at::Tensor> fp;
      ir::InterpreterOptions o;
      o.observer = [&](const ir::Value& v, const c10::IValue& iv) {
        if (iv.isTensor() && wanted.count(v.name()) && v.owningBlock() == g.block()) fp[v.name()] = iv.toTensor().clone();  // in-place ops may write it later
      };
      ir::Interpreter refObs(g, o);
      auto refOut = refObs.run(batch);
      ir::InterpreterOptions qo;
      qo.observer = [&](const ir::Value& v, const c10::IValue& iv) {
        auto it = quantizedNames.find(&v);
        if (it == quantizedNames.end() || !iv.isTensor()) return;
        auto f = fp.find(it->second);
        if (f == fp.end()) return;
        at::Tensor deq = iv.toTensor().is_quantized() ? iv.toTensor().dequantize() : iv.toTensor();
        at::Tensor r = f->second.detach().to(at::kDouble), d = deq.to(at::kDouble);
        auto& p = power[it->second];
        p.first += r.pow(2).sum().item<double>();
        p.second += (r - d).pow(2).sum().item<double>();
      };
      ir::Interpreter q(*copy, qo);
      auto qOut = q.run(batch);
      // Entries: the quantization of float inputs itself.
      for (size_t i = 0; i < origCands.size(); ++i) {
        if (fp32.count(i) || dynamic || origCands[i].kind == Kind::Rnn) continue;  // quantized per call
        for (ir::Value* x : tensorInputs(origCands[i])) {
          if (built.quantizedByName.count(x->name())) continue;
          auto f = fp.find(x->name());
          auto qpIt = qparams.find(x->name());
          if (f == fp.end() || qpIt == qparams.end()) continue;
          at::Tensor r = f->second.detach().to(at::kFloat);
          at::Tensor d = at::quantize_per_tensor(r, qpIt->second.scale, qpIt->second.zeroPoint, at::kQUInt8).dequantize();
          auto& p = power["entry:" + x->name()];
          p.first += r.to(at::kDouble).pow(2).sum().item<double>();
          p.second += (r.to(at::kDouble) - d.to(at::kDouble)).pow(2).sum().item<double>();
        }
      }
      std::vector<at::Tensor> a, b;
      for (const auto& v : refOut) floatTensors(v, a);
      for (const auto& v : qOut) floatTensors(v, b);
      for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        at::Tensor bq = b[i].is_quantized() ? b[i].dequantize() : b[i];
        worstCos = std::min(worstCos, cosine(a[i], bq));
        if (a[i].dim() == 2 && a[i].size(1) > 1) {
          agree += a[i].argmax(1).eq(bq.argmax(1)).sum().item<int64_t>();
          rows += a[i].size(0);
        }
      }
    }
  } catch (const std::exception& e) {
    ev.error = ir::torchErrorMessage(e);
    ev.cosine = -1;
    return ev;
  }
  auto db = [](const std::pair<double, double>& p) {
    if (p.second <= 0) return std::numeric_limits<double>::infinity();
    if (p.first <= 0) return -std::numeric_limits<double>::infinity();
    return 10.0 * std::log10(p.first / p.second);
  };
  for (size_t i = 0; i < origCands.size(); ++i) {
    auto it = power.find(origCands[i].out->name());
    if (it != power.end()) ev.sqnr[i] = db(it->second);
    double in = std::numeric_limits<double>::infinity();
    for (ir::Value* x : tensorInputs(origCands[i])) {
      auto p = power.find(x->name());
      if (p == power.end()) p = power.find("entry:" + x->name());
      if (p != power.end()) in = std::min(in, db(p->second));
    }
    ev.inSqnr[i] = in;
  }
  ev.cosine = worstCos;
  if (rows > 0) ev.top1 = static_cast<double>(agree) / static_cast<double>(rows);
  return ev;
}

}  // namespace

std::string QuantizeReport::summary() const {
  std::ostringstream s;
  if (!ran) return "";
  s << fmt::format("int8 ({} mode, {} observer, engine {}): calibration {} ({} batch(es){}), held-out {} batch(es)\n", mode,
                   observer, engine, calibrationSource, calibrationBatches,
                   syntheticCalibration ? ", SYNTHETIC: accuracy needs real data" : "", heldOutBatches);
  if (!applied) {
    s << "  not applied: " << declined << "\n";
  } else {
    s << fmt::format("  held-out vs fp32: worst cosine {:.5f} (min {:g})", cosine, minCosine);
    if (top1Agreement) s << fmt::format(", top-1 agreement {:.1f}%", 100 * *top1Agreement);
    s << "\n";
  }
  if (!ops.empty()) {
    s << "  op                                        kind             SQNR dB\n";
    for (const auto& op : ops) {
      const std::string sq = std::isfinite(op.sqnrDb) ? fmt::format("{:7.1f}", op.sqnrDb) : "      -";
      s << fmt::format("  {:<42.42} {:<16} {}{}\n", op.op, op.kind, sq, op.fp32 ? "  fp32 (" + op.why + ")" : "");
    }
  }
  return s.str();
}

PassResult QuantizePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  const bool dynamic = options().getString("mode") == "dynamic";
  QuantizeReport& rep = ctx.reports.getOrCreate<QuantizeReport>();
  rep = QuantizeReport{};
  rep.ran = true;
  rep.mode = options().getString("mode");
  rep.observer = dynamic ? "none" : options().getString("observer");
  rep.minCosine = options().getFloat("min-cosine");
  const bool reduceRange = int8NeedsReduceRange();
  const RnnWeights rnnWeights = parseRnnWeights(options().getString("rnn-weights"));
  rep.engine = int8EngineNote();

  auto cands = findCandidates(graph, dynamic, &ctx, name());
  // Adds and cats alone are not worth int8 (they only join int8 regions).
  const bool anyCompute = std::any_of(cands.begin(), cands.end(), [](const Candidate& c) { return isCompute(c.kind); });
  if (!anyCompute) cands.clear();
  if (cands.empty()) {
    rep.declined = "no quantizable op";
    ctx.decline(name(), graph.block()->outputNode(),
                dynamic ? "no aten::linear, aten::lstm or aten::gru with constant weights"
                        : "no quantizable op (conv2d, linear, add, cat, lstm, gru)");
    return r;
  }
  // fp32-ops
  std::set<size_t> fp32;
  std::map<size_t, std::string> why;
  {
    std::stringstream ss(options().getString("fp32-ops"));
    std::string item;
    while (std::getline(ss, item, ';')) {
      if (item.empty()) continue;
      for (size_t i = 0; i < cands.size(); ++i) {
        const std::string nm = "%" + cands[i].op->output()->name();
        if (item == nm || item == cands[i].op->output()->name() || item == cands[i].op->target()) {
          fp32.insert(i);
          why[i] = "fp32-ops";
        }
      }
    }
  }

  // Calibration data.
  std::vector<std::vector<c10::IValue>> batches;
  if (const CalibrationData* cal = ctx.inputs.find<CalibrationData>()) {
    batches = cal->batches;
    rep.calibrationSource = cal->source;
    rep.syntheticCalibration = cal->synthetic;
  } else if (ctx.exampleInputs) {
    batches = randomCalibrationBatches(*ctx.exampleInputs, static_cast<size_t>(options().getInt("random-batches")), 0);
    rep.calibrationSource = "seeded random inputs";
    rep.syntheticCalibration = true;
    if (!dynamic)
      ctx.warn(name(), "no --calibration data; calibrating int8 on seeded RANDOM inputs of the --input-shape. "
                       "Accuracy needs real data: pass --calibration FILE (a list of input batches).");
  } else {
    rep.declined = "no calibration data and no example inputs";
    ctx.decline(name(), graph.block()->outputNode(), "no calibration data (--calibration FILE) and no --input-shape to draw inputs from");
    return r;
  }
  if (batches.empty()) throw ir::InputError("quantize: the calibration set holds no batch");
  // Held-out: the last quarter (at least one batch); a single batch serves both.
  size_t held = batches.size() >= 2 ? std::max<size_t>(1, batches.size() / 4) : 0;
  std::vector<std::vector<c10::IValue>> calib(batches.begin(), batches.end() - static_cast<std::ptrdiff_t>(held));
  std::vector<std::vector<c10::IValue>> heldOut(batches.end() - static_cast<std::ptrdiff_t>(held), batches.end());
  if (heldOut.empty()) heldOut = calib;
  rep.calibrationBatches = calib.size();
  rep.heldOutBatches = heldOut.size();

  // Observers on every top-level float tensor.
  std::map<std::string, QParams> qparams;
  if (!dynamic) {
    std::unordered_map<std::string, Observer> observers;
    const ObserverKind kind = parseObserverKind(options().getString("observer"));
    for (int pass = 0; pass < (kind == ObserverKind::MinMax ? 1 : 2); ++pass) {
      ir::InterpreterOptions o;
      o.observer = [&](const ir::Value& v, const c10::IValue& iv) {
        if (!iv.isTensor() || v.owningBlock() != graph.block()) return;
        const at::Tensor& t = iv.toTensor();
        if (t.scalar_type() != at::kFloat || t.is_quantized()) return;
        if (pass == 0) observers[v.name()].observeRange(t);
        else observers[v.name()].observeHistogram(t);
      };
      ir::Interpreter interp(graph, o);
      for (size_t b = 0; b < calib.size(); ++b) {
        try {
          interp.run(calib[b]);
        } catch (const std::exception& e) {
          throw ir::InputError(fmt::format("quantize: the model fails on calibration batch {} ({}): {}", b,
                                           rep.calibrationSource, ir::torchErrorMessage(e)));
        }
      }
    }
    for (const auto& [nm, obs] : observers) {
      if (!std::isfinite(obs.min()) || !std::isfinite(obs.max()))
        throw ir::InputError(fmt::format("quantize: value %{} holds NaN or Inf on the calibration data ({})", nm,
                                         rep.calibrationSource));
      qparams[nm] = obs.qparams(kind, options().getFloat("percentile"), reduceRange);
    }
  }

  // The accuracy guard.
  const double minCos = options().getFloat("min-cosine");
  Evaluation ev = evaluate(graph, fp32, qparams, heldOut, dynamic, reduceRange, rnnWeights);
  if (!ev.error.empty()) throw PassError("quantize: the int8 graph fails to run: " + ev.error);
  int64_t maxFallback = options().getInt("max-fallback");
  if (maxFallback < 0)
    maxFallback = std::max<int64_t>(
        1, std::count_if(cands.begin(), cands.end(), [](const Candidate& c) { return isCompute(c.kind); }) / 2);
  while (ev.cosine < minCos && options().getBool("fallback") && r.counter("fallback") < maxFallback) {
    // The op that loses the most SQNR between its inputs and its output.
    std::optional<size_t> worst;
    double worstDrop = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < cands.size(); ++i) {
      if (fp32.count(i) || !ev.quantized.count(i)) continue;
      auto o = ev.sqnr.find(i);
      const double out = o == ev.sqnr.end() ? std::numeric_limits<double>::infinity() : o->second;
      double in = ev.inSqnr.count(i) ? ev.inSqnr.at(i) : std::numeric_limits<double>::infinity();
      if (!std::isfinite(in)) in = 100.0;  // exact input: the op's own error counts
      const double drop = in - out;
      if (!worst || drop > worstDrop) { worst = i; worstDrop = drop; }
    }
    if (!worst) break;
    fp32.insert(*worst);
    why[*worst] = fmt::format("fallback: cosine {:.4f} < {:g}", ev.cosine, minCos);
    r.count("fallback");
    if (std::none_of(ev.quantized.begin(), ev.quantized.end(), [&](size_t i) { return !fp32.count(i); })) break;
    ev = evaluate(graph, fp32, qparams, heldOut, dynamic, reduceRange, rnnWeights);
    if (!ev.error.empty()) throw PassError("quantize: the int8 graph fails to run: " + ev.error);
  }
  for (size_t i = 0; i < cands.size(); ++i) {
    QuantizeOpReport op;
    op.op = cands[i].label;
    op.kind = cands[i].kindName;
    if (auto it = ev.sqnr.find(i); it != ev.sqnr.end()) op.sqnrDb = it->second;
    op.fp32 = fp32.count(i) != 0 || !ev.quantized.count(i);
    if (fp32.count(i)) op.why = why[i];
    else if (op.fp32) op.why = "no int8 input: not worth a region of its own";
    rep.ops.push_back(op);
  }
  rep.cosine = ev.cosine;
  rep.top1Agreement = ev.top1;
  const bool computeLeft =
      std::any_of(ev.quantized.begin(), ev.quantized.end(), [&](size_t i) { return isCompute(cands[i].kind); });
  if (!computeLeft) {
    rep.declined = fmt::format("nothing worth quantizing is left: every quantizable op is kept in fp32 "
                               "(worst held-out cosine {:.4f} < min-cosine {:g})", ev.cosine, minCos);
    ctx.decline(name(), graph.block()->outputNode(), rep.declined);
    return r;
  }
  if (ev.cosine < minCos) {
    rep.declined = fmt::format("int8 misses the accuracy criterion: worst held-out cosine {:.4f} < min-cosine {:g}",
                               ev.cosine, minCos);
    ctx.decline(name(), graph.block()->outputNode(), rep.declined);
    return r;
  }
  BuildResult built = build(graph, cands, fp32, qparams, &ctx.edits, name(), reduceRange, rnnWeights);
  rep.applied = true;
  r.changed = built.quantized > 0;
  r.count(dynamic ? "dynamic" : "quantized", built.quantized);
  if (built.rnn > 0) r.count("rnn", built.rnn);
  if (!dynamic) {
    r.count("entries", built.entries);
    r.count("exits", built.exits);
  }
  return r;
}

}  // namespace ptopt::quant
