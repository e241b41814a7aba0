#include "quant/int8_candidates.h"

#include "ir/mutation.h"
#include "ir/op_views.h"
#include "quant/quantize_rnn.h"
#include "rewriters/constants.h"

#include <optional>

namespace ptopt::quant {

using namespace rewriters;

bool isOnlyUser(const ir::Value* v, const ir::Node* n) {
  for (const auto& u : v->uses())
    if (u.user != n) return false;
  return !v->uses().empty();
}

namespace {

bool isFloatTensor(const ir::Value* v) {
  if (!v || !v->isTensor()) return false;
  const auto& d = v->meta().dtype;
  return !d || *d == c10::ScalarType::Float;
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

}  // namespace

std::vector<Int8Candidate> findInt8Candidates(ir::Graph& g, bool dynamic, PassContext* ctx, const std::string& pass) {
  std::vector<Int8Candidate> out;
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
      out.push_back({Int8Kind::Rnn, n, nullptr, n->output(), describe(n), n->target().substr(6) + "_dynamic"});
      continue;
    }
    if (dynamic) {
      if (auto lin = ir::LinearOp::match(n)) {
        auto w = constantTensor(lin->weight());
        if (!w || w->dim() != 2 || w->scalar_type() != at::kFloat) { decline(n, "weight is not a constant float matrix"); continue; }
        if (lin->bias() && !constantTensor(lin->bias())) { decline(n, "bias is not a constant"); continue; }
        out.push_back({Int8Kind::LinearDynamic, n, nullptr, n->output(), describe(n), "linear_dynamic"});
      }
      continue;
    }
    Int8Candidate c;
    c.op = n;
    if (auto conv = ir::ConvOp::match(n)) {
      auto w = constantTensor(conv->weight());
      if (conv->transposed()) { decline(n, "transposed conv: no int8 kernel used"); continue; }
      // conv1d (speech: Wav2Letter, ConvTasNet) and conv2d; LibTorch has no static int8 conv3d on CPU.
      if (!w || (w->dim() != 3 && w->dim() != 4) || w->scalar_type() != at::kFloat) {
        decline(n, "not a 1-D or 2-D conv with a constant float weight");
        continue;
      }
      if (conv->bias() && !constantTensor(conv->bias())) { decline(n, "bias is not a constant"); continue; }
      if (!conv->stride() || !conv->padding() || !conv->dilation()) { decline(n, "stride/padding/dilation are not int lists (padding='same'?)"); continue; }
      if (!isFloatTensor(conv->input())) { decline(n, "input is not float32"); continue; }
      c.kind = Int8Kind::Conv;
      c.kindName = w->dim() == 3 ? "conv1d" : "conv2d";
    } else if (auto lin = ir::LinearOp::match(n)) {
      auto w = constantTensor(lin->weight());
      if (!w || w->dim() != 2 || w->scalar_type() != at::kFloat) { decline(n, "weight is not a constant float matrix"); continue; }
      if (lin->bias() && !constantTensor(lin->bias())) { decline(n, "bias is not a constant"); continue; }
      if (!isFloatTensor(lin->input())) { decline(n, "input is not float32"); continue; }
      c.kind = Int8Kind::Linear;
      c.kindName = "linear";
    } else if (auto add = ir::AddOp::match(n)) {
      ir::Value* a = add->self();
      ir::Value* b = add->other();
      if (!a || !b) continue;
      if (!a->isTensor() || !b->isTensor() || !isFloatTensor(a) || !isFloatTensor(b)) continue;
      if (add->alpha() != 1.0) { decline(n, "alpha is not 1"); continue; }
      if (!sameKnownShape(a, b)) { decline(n, "operand shapes are unknown or differ (no broadcasting int8 add)"); continue; }
      if (add->inPlace() && !isOnlyUser(a, n)) { decline(n, "in-place add whose target has other users"); continue; }
      c.kind = Int8Kind::Add;
      c.kindName = add->fusedRelu() ? "add_relu" : "add";
    } else if (n->is("aten::mul") && n->overload() == "Tensor" && n->numArgs() == 2) {
      // A squeeze-excite gate, x * hardsigmoid(s): quantized::mul broadcasts.
      const ir::OpView mul = ir::OpView::of(n);
      ir::Value* a = mul.value("self");
      ir::Value* b = mul.value("other");
      if (!a || !b || !a->isTensor() || !b->isTensor() || !isFloatTensor(a) || !isFloatTensor(b)) continue;
      // Others (a scale by a 0-dim tensor) are not gates: left alone, unsaid.
      if (!a->meta().shape || !b->meta().shape || a->meta().shape->size() != b->meta().shape->size()) continue;
      c.kind = Int8Kind::Mul;
      c.kindName = "mul";
    } else if (auto cat = ir::CatOp::match(n)) {
      if (n->numArgs() != 2 || !cat->tensors() || !cat->dimArg().isLiteral()) continue;
      ir::Value* list = cat->tensors();
      ir::Node* lc = list->node();
      if (!lc || !lc->is("prim::ListConstruct") || list->uses().size() != 1) { decline(n, "its list is not built for it alone"); continue; }
      bool ok = lc->numArgs() > 0;
      for (const auto& a : lc->args()) ok = ok && a.isValue() && isFloatTensor(a.value()) && a.value()->isTensor();
      if (!ok) { decline(n, "cat of non-float or literal elements"); continue; }
      c.kind = Int8Kind::Cat;
      c.kindName = "cat";
    } else {
      continue;
    }
    c.out = n->output();
    if (c.kind == Int8Kind::Conv || c.kind == Int8Kind::Linear || (c.kind == Int8Kind::Add && c.kindName == "add")) {
      if (ir::Node* act = fusableActivation(n->output())) {
        const bool relu = act->target().find("relu") != std::string::npos;
        const bool inPlace = act->target().back() == '_';
        if (!(c.kind == Int8Kind::Linear && !relu) && !(c.kind == Int8Kind::Add && !relu) && (!inPlace || isOnlyUser(n->output(), act))) {
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

std::vector<ir::Value*> addOrCatInputs(ir::Node* n) {
  if (auto add = ir::AddOp::match(n)) return {add->self(), add->other()};
  if (n->is("aten::mul")) return {ir::OpView::of(n).value("self"), ir::OpView::of(n).value("other")};
  std::vector<ir::Value*> xs;
  for (const auto& a : ir::CatOp::match(n)->tensors()->node()->args()) xs.push_back(a.value());
  return xs;
}

std::vector<ir::Value*> tensorInputs(const Int8Candidate& c) {
  std::vector<ir::Value*> xs;
  if (c.kind == Int8Kind::Conv) xs.push_back(ir::ConvOp::match(c.op)->input());
  else if (c.kind == Int8Kind::Linear || c.kind == Int8Kind::LinearDynamic) xs.push_back(ir::LinearOp::match(c.op)->input());
  else if (c.kind == Int8Kind::Rnn) xs.push_back(rnnSequenceInput(c.op));
  else xs = addOrCatInputs(c.op);
  return xs;
}

}  // namespace ptopt::quant
