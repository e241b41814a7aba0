#include "quant/quantize_rnn.h"

#include "ir/interpreter.h"
#include "ir/mutation.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "quant/observers.h"
#include "rewriters/constants.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <fmt/format.h>

#include <optional>

namespace ptopt::quant {

namespace {

bool isLstm(const ir::Node* n) { return n->is("aten::lstm"); }

// The flat weights of an RNN op when they are constants: a List[Tensor]
// constant (torch.jit.script reads `self._flat_weights`), or a
// prim::ListConstruct of tensor constants (torch.jit.trace). `elements`
// receives the get_attr values of the second form.
std::optional<std::vector<at::Tensor>> constantWeights(const ir::Value* list, std::vector<ir::Value*>* elements) {
  const ir::Node* p = list ? list->node() : nullptr;
  if (!p) return std::nullopt;
  std::vector<at::Tensor> out;
  if (p->opcode() == ir::Opcode::GetAttr) {
    const auto& constants = list->graph().constants();
    if (!constants.contains(p->target())) return std::nullopt;
    const c10::IValue& iv = constants.at(p->target());
    if (!iv.isTensorList()) return std::nullopt;
    for (const at::Tensor& t : iv.toTensorVector()) out.push_back(t);
    return out;
  }
  if (!p->is("prim::ListConstruct")) return std::nullopt;
  for (const auto& a : p->args()) {
    if (!a.isValue()) return std::nullopt;
    auto t = rewriters::constantTensor(a.value());
    if (!t) return std::nullopt;
    out.push_back(*t);
    if (elements) elements->push_back(a.value());
  }
  return out;
}

// Some constant the graph may write is one of `weights` (a scripted model
// that writes `self.lstm.weight_hh_l0` in place also changes the element of
// `self.lstm._flat_weights` that is that tensor): shares its storage, or has
// its shape and values, or, for a list constant (`rnn._flat_weights`), is a
// tensor of the same module (`rnn.weight_hh_l0`). The import copies a written
// constant, so it no longer shares storage with the list that held it, and a
// run of the original module may already have changed the list's values;
// an unrelated written constant equal to a weight only makes this conservative.
bool writtenElsewhere(const ir::Graph& g, const ir::MutationAnalysis& mutation, const ir::Value* list,
                      const std::vector<at::Tensor>& weights) {
  const ir::Node* p = list->node();
  const bool isListConstant = p && p->opcode() == ir::Opcode::GetAttr;
  const std::string listModule =
      isListConstant && rewriters::modulePrefix(p->target()) != p->target() ? rewriters::modulePrefix(p->target()) : "";
  for (const std::string& name : mutation.writtenConstants()) {
    if (!g.constants().contains(name)) continue;
    if (!listModule.empty() && rewriters::modulePrefix(name) == listModule && g.constants().at(name).isTensor())
      return true;
    const c10::IValue& iv = g.constants().at(name);
    std::vector<at::Tensor> written;
    if (iv.isTensor()) written.push_back(iv.toTensor());
    else if (iv.isTensorList()) written = iv.toTensorVector();
    for (const at::Tensor& w : written)
      for (const at::Tensor& t : weights)
        if (w.defined() && t.defined() &&
            (w.is_alias_of(t) || (w.sizes() == t.sizes() && w.scalar_type() == t.scalar_type() && at::equal(w, t))))
          return true;
  }
  return false;
}

struct Layout {
  bool lstm = true, hasBiases = true, bidirectional = false;
  int64_t numLayers = 1;
  int64_t directions() const { return bidirectional ? 2 : 1; }
  int64_t perCell() const { return hasBiases ? 4 : 2; }
  int64_t gates() const { return lstm ? 4 : 3; }
};

std::optional<Layout> literalLayout(const ir::Node* n, std::string* why) {
  const ir::OpView v = ir::OpView::of(const_cast<ir::Node*>(n));
  Layout l;
  l.lstm = isLstm(n);
  auto bias = v.boolArg("has_biases");
  auto layers = v.intArg("num_layers");
  auto bidir = v.boolArg("bidirectional");
  auto train = v.boolArg("train");
  if (!bias || !layers || !bidir || !train) {
    *why = "has_biases, num_layers, bidirectional or train is not a literal";
    return std::nullopt;
  }
  if (*train) {
    *why = "runs in training mode (train=True)";
    return std::nullopt;
  }
  l.hasBiases = *bias;
  l.numLayers = *layers;
  l.bidirectional = *bidir;
  return l;
}

// Checks the flat weights against the layout of a plain LSTM/GRU: per cell
// w_ih [G*H, in], w_hh [G*H, H] (and b_ih, b_hh [G*H]), G = 4 (LSTM) or 3 (GRU).
std::string checkWeights(const Layout& l, const std::vector<at::Tensor>& w) {
  if (static_cast<int64_t>(w.size()) != l.numLayers * l.directions() * l.perCell())
    return fmt::format("{} weight tensors, expected {} (an LSTM with proj_size has no dynamic int8 kernel)", w.size(),
                       l.numLayers * l.directions() * l.perCell());
  for (const at::Tensor& t : w)
    if (!t.defined() || t.scalar_type() != at::kFloat || t.is_quantized()) return "weights are not float32";
  for (size_t c = 0; c < w.size(); c += static_cast<size_t>(l.perCell())) {
    const at::Tensor &ih = w[c], &hh = w[c + 1];
    if (ih.dim() != 2 || hh.dim() != 2) return "weights are not matrices";
    const int64_t h = hh.size(1), gh = l.gates() * h;
    if (ih.size(0) != gh || hh.size(0) != gh)
      return "weight shapes are not those of a plain LSTM/GRU (proj_size?)";
    if (l.hasBiases && (w[c + 2].dim() != 1 || w[c + 2].size(0) != gh || w[c + 3].dim() != 1 || w[c + 3].size(0) != gh))
      return "bias shapes do not match the weights";
  }
  return "";
}

// `lstm.weight_ih_l0` -> `lstm`; `lstm._flat_weights` -> `lstm`.
std::string weightsModule(const ir::Value* list, const std::vector<ir::Value*>& elements) {
  const ir::Value* named = !elements.empty() ? elements.front() : list;
  if (named && named->node() && named->node()->opcode() == ir::Opcode::GetAttr) {
    const std::string prefix = rewriters::modulePrefix(named->node()->target());
    if (prefix != named->node()->target()) return prefix;
  }
  return "rnn";
}

// Symmetric qint8 for one weight matrix under `scheme` (see RnnWeights).
at::Tensor quantizeRnnWeight(const at::Tensor& w, RnnWeights scheme) {
  at::Tensor wf = w.detach().to(at::kFloat).contiguous();
  const bool perChannel =
      scheme == RnnWeights::PerChannel || (scheme == RnnWeights::Auto && rnnWeightNeedsPerChannel(wf));
  if (perChannel) return quantizeWeightPerChannel(wf);
  const double max = wf.abs().max().item<double>();
  return at::quantize_per_tensor(wf, std::max(max / 127.5, 1e-8), 0, at::kQInt8);
}

}  // namespace

RnnWeights parseRnnWeights(const std::string& s) {
  if (s == "auto") return RnnWeights::Auto;
  if (s == "per-tensor") return RnnWeights::PerTensor;
  if (s == "per-channel") return RnnWeights::PerChannel;
  throw std::invalid_argument("rnn-weights: expected auto, per-tensor or per-channel, got '" + s + "'");
}

bool rnnWeightNeedsPerChannel(const at::Tensor& w) {
  at::Tensor rowMax = w.detach().to(at::kFloat).abs().reshape({w.size(0), -1}).amax(1);
  const double max = rowMax.max().item<double>();
  if (max <= 0) return false;
  at::Tensor used = rowMax.masked_select(rowMax > 0);  // all-zero rows are exact either way
  return used.min().item<double>() < max / 8;
}

bool isRnnOp(const ir::Node* n) { return n->isCall() && (n->is("aten::lstm") || n->is("aten::gru")); }

ir::Value* rnnSequenceInput(const ir::Node* n) {
  const ir::OpView v = ir::OpView::of(const_cast<ir::Node*>(n));
  if (v.has("input")) return v.value("input");
  if (v.has("data")) return v.value("data");
  return nullptr;
}

std::string rnnDeclineReason(const ir::Node* n, const ir::MutationAnalysis& mutation) {
  if (!n->schema() || (n->overload() != "input" && n->overload() != "data"))
    return "unknown overload " + n->qualifiedTarget();
  const ir::Value* seq = rnnSequenceInput(n);
  if (!seq || !seq->isTensor() || (seq->meta().dtype && *seq->meta().dtype != c10::ScalarType::Float))
    return "its input is not float32";
  std::string why;
  auto layout = literalLayout(n, &why);
  if (!layout) return why;
  const ir::Value* list = ir::OpView::of(const_cast<ir::Node*>(n)).value("params");
  std::vector<ir::Value*> elements;
  auto weights = constantWeights(list, &elements);
  if (!weights) return "its weights are not constants (the params list is computed)";
  if (mutation.mayBeWritten(list)) return "the model writes its weights (the params list) in place";
  for (const ir::Value* e : elements)
    if (mutation.mayBeWritten(e)) return "the model writes its weight %" + e->name() + " in place";
  if (writtenElsewhere(n->graph(), mutation, list, *weights))
    return "the model writes its weights in place (through another name)";
  return checkWeights(*layout, *weights);
}

ir::Value* buildDynamicRnn(ir::Rewriter& rw, ir::Node* n, bool reduceRange, RnnWeights weights) {
  std::string why;
  const Layout l = *literalLayout(n, &why);
  const ir::OpView view = ir::OpView::of(n);
  ir::Value* list = view.value("params");
  std::vector<ir::Value*> elements;
  const std::vector<at::Tensor> w = *constantWeights(list, &elements);
  const std::string module = weightsModule(list, elements);

  // One CellParamsBase per layer and direction, in the order of the flat weights.
  std::vector<ir::Arg> cells;
  for (int64_t layer = 0; layer < l.numLayers; ++layer) {
    for (int64_t dir = 0; dir < l.directions(); ++dir) {
      const size_t c = static_cast<size_t>((layer * l.directions() + dir) * l.perCell());
      const at::Tensor& wIh = w[c];
      const at::Tensor& wHh = w[c + 1];
      const at::Tensor bIh = l.hasBiases ? w[c + 2].detach().contiguous() : at::zeros({wIh.size(0)}, at::kFloat);
      const at::Tensor bHh = l.hasBiases ? w[c + 3].detach().contiguous() : at::zeros({wHh.size(0)}, at::kFloat);
      c10::IValue packedIh = ir::callOperator("quantized::linear_prepack", "", {quantizeRnnWeight(wIh, weights), bIh});
      c10::IValue packedHh = ir::callOperator("quantized::linear_prepack", "", {quantizeRnnWeight(wHh, weights), bHh});
      c10::IValue cell = ir::callOperator("quantized::make_quantized_cell_params_dynamic", "",
                                {packedIh, packedHh, bIh, bHh, reduceRange});
      cells.emplace_back(rw.addConstant(fmt::format("{}.cell_params_l{}{}", module, layer, dir == 1 ? "_reverse" : ""),
                                        cell, cell.type(), n));
    }
  }
  const c10::TypePtr cellType = cells.front().value()->type();
  ir::Value* cellList = rw.call(n, "prim::ListConstruct", cells, c10::ListType::create(cellType));
  rw.setName(cellList, module + ".cell_params");

  // The quantized op of the same overload, its arguments matched by name.
  const std::string target = std::string(isLstm(n) ? "aten::quantized_lstm." : "aten::quantized_gru.") + n->overload();
  const auto [base, overload] = ir::splitQualifiedTarget(target);
  const c10::FunctionSchema* schema = ir::findSchema(base, overload);
  if (!schema) throw std::logic_error("quantize: no operator " + target);
  std::vector<ir::Arg> args;
  for (const auto& a : schema->arguments()) {
    if (a.name() == "params") args.emplace_back(cellList);
    else if (a.name() == "dtype") args.emplace_back(ir::Literal(c10::ScalarType::QInt8));
    else if (a.name() == "use_dynamic") args.emplace_back(ir::Literal(true));
    else if (a.name() == "has_biases") args.emplace_back(ir::Literal(true));  // zero biases stand in for none
    else args.push_back(view.arg(a.name()));
  }
  std::vector<c10::TypePtr> types;
  for (const auto& out : n->outputs()) types.push_back(out->type());
  ir::Node* q = rw.insertCall(n, target, std::move(args), types);
  std::vector<std::string> names;
  for (size_t i = 0; i < n->outputs().size(); ++i) {
    rw.setMeta(q->output(i), n->output(i)->meta());
    names.push_back(n->output(i)->name());
    rw.replaceAllUsesWith(n->output(i), q->output(i));
  }
  rw.erase(n);
  for (size_t i = 0; i < names.size(); ++i) rw.setName(q->output(i), names[i]);
  // The float weights, when nothing else reads them.
  if (!list->hasUses()) {
    ir::Node* producer = list->node();
    rw.erase(producer);
    for (ir::Value* e : elements)
      if (!e->hasUses()) rw.erase(e->node());
  }
  return q->output(0);
}

}  // namespace ptopt::quant
