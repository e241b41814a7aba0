#include "layout/onednn_blocked.h"

#include "ir/ir.h"
#include "ir/literal.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "ir/mutation.h"
#include "rewriters/constants.h"
#include "rewriters/name_list.h"
#include "target/kernel_probes.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

namespace ptopt::layout {

using rewriters::OptionKind;
using rewriters::PassContext;
using rewriters::PassResult;

std::vector<rewriters::OptionSpec> OneDnnBlockedPass::optionSpecs() const {
  return {{"min-convs", OptionKind::Int, "2",
           "convert a region only when it has at least this many convs (entry and exit reorders cost)", {}, 1.0, {}},
          {"regions", OptionKind::String, "",
           "only these regions (the names of their first ops' results, ';'-separated; empty: all), as --tune "
           "decides them", {}, {}, {}}};
}

namespace {

// A 4-D float32/bfloat16 CPU tensor as shape-prop saw it.
std::optional<c10::ScalarType> cpuFloat4d(const ir::Value* v) {
  if (!v || !v->isTensor()) return std::nullopt;
  const ir::TensorMeta& m = v->meta();
  if (!m.shape || m.shape->size() != 4 || !m.dtype) return std::nullopt;
  if (*m.dtype != c10::ScalarType::Float && *m.dtype != c10::ScalarType::BFloat16) return std::nullopt;
  if (m.device && !m.device->is_cpu()) return std::nullopt;
  return m.dtype;
}

// Why conv `c` cannot run on oneDNN tensors with a packed weight, or "".
std::string convIneligible(const ir::Conv2dKernelOp& c) {
  if (!c.hasLiteralGeometry()) return "its stride/padding/dilation/groups are not literals";
  const auto w = c.weight().isValue() ? rewriters::constantTensor(c.weight().value()) : std::nullopt;
  if (!w || w->dim() != 4 || !w->device().is_cpu() || w->layout() != c10::kStrided)
    return "its weight is not a constant 4-D CPU tensor";
  if (c.bias().isValue() && !rewriters::constantTensor(c.bias().value())) return "its bias is not a constant";
  const auto dtype = c.input().isValue() ? cpuFloat4d(c.input().value()) : std::nullopt;
  if (!dtype) return "its input is not known to be a 4-D float32 or bfloat16 CPU tensor (run shape-prop)";
  if (*dtype != w->scalar_type()) return "its weight's dtype differs from its input's";
  return target::oneDnnConvMissing(target::OneDnnConv::Blocked, *dtype);
}

// A conv form this pass converts (aten::conv2d, aten::mkldnn_convolution),
// with or without all its arguments.
bool isConv2dForm(const ir::Node* n) {
  return (n->is("aten::conv2d") && n->overload().empty()) || n->is("aten::mkldnn_convolution");
}

// `args` followed by the defaults of the schema's remaining arguments, so a
// node has what this LibTorch's operator takes (2.x's to_dense has a
// keyword-only masked_grad that 1.13's lacks).
std::vector<ir::Arg> withDefaults(const std::string& op, std::vector<ir::Arg> args) {
  const c10::FunctionSchema* schema = ir::findSchema(op, "");
  if (!schema) return args;
  for (size_t i = args.size(); i < schema->arguments().size(); ++i) {
    const c10::Argument& formal = schema->arguments()[i];
    if (!formal.default_value()) break;
    auto lit = ir::Literal::fromIValue(*formal.default_value(), formal.real_type());
    if (!lit) break;
    args.emplace_back(*lit);
  }
  return args;
}

bool sameShape(const ir::Value* a, const ir::Value* b) {
  return a && b && a->meta().shape && b->meta().shape && *a->meta().shape == *b->meta().shape;
}

class Converter {
 public:
  Converter(ir::Graph& g, PassContext& ctx, std::string pass, int64_t minConvs)
      : g_(g), ctx_(ctx), pass_(std::move(pass)), minConvs_(minConvs), mutation_(g) {}

  // The regions, by root, each its members in program order.
  std::map<size_t, std::vector<ir::Node*>> regions() {
    std::vector<ir::Node*> order;
    for (ir::Node* n : *g_.block()) order.push_back(n);
    // Membership, in program order: a value is blocked when a member made it.
    std::map<const ir::Node*, size_t> regionOf;  // member -> region id
    std::vector<size_t> parent;                  // union-find over region ids
    auto find = [&](size_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    auto regionOfValue = [&](const ir::Value* v) -> std::optional<size_t> {
      if (!v || !v->node()) return std::nullopt;
      auto it = regionOf.find(v->node());
      return it == regionOf.end() ? std::nullopt : std::optional<size_t>(find(it->second));
    };
    for (ir::Node* n : order) {
      if (!n->isCall() || n->numOutputs() != 1 || !n->blocks().empty()) continue;
      std::optional<size_t> joined;
      if (isConv2dForm(n)) {
        const auto c = ir::Conv2dKernelOp::match(n);
        if (std::string why = c ? convIneligible(*c) : "the conv has defaulted arguments"; !why.empty()) {
          ctx_.decline(pass_, n, why);
          continue;
        }
        joined = regionOfValue(c->input().value());
        if (!joined) {
          joined = parent.size();
          parent.push_back(*joined);
        }
      } else if (auto inputs = memberInputs(n)) {
        // Every tensor input a member: join (and merge) their regions.
        for (const ir::Value* in : *inputs) {
          auto rid = regionOfValue(in);
          if (!rid) {
            joined.reset();
            break;
          }
          if (!joined) joined = rid;
          else if (*rid != *joined) parent[*rid] = *joined;
        }
        if (!joined) continue;
      } else {
        continue;
      }
      if (!resultStaysPut(n->output())) {
        ctx_.decline(pass_, n, "its result is written in place where other ops read it");
        continue;
      }
      regionOf[n] = *joined;
    }
    std::map<size_t, std::vector<ir::Node*>> members;  // root -> members in program order
    for (ir::Node* n : order)
      if (auto it = regionOf.find(n); it != regionOf.end()) members[find(it->second)].push_back(n);
    return members;
  }

  // The regions that min-convs keeps: id (the first member's result) and convs.
  std::vector<BlockedRegion> listed() {
    std::vector<BlockedRegion> out;
    for (auto& [root, nodes] : regions()) {
      const size_t convs = static_cast<size_t>(std::count_if(nodes.begin(), nodes.end(), isConv2dForm));
      if (static_cast<int64_t>(convs) >= minConvs_) out.push_back({nodes.front()->output()->name(), convs});
    }
    return out;
  }

  PassResult run(const std::set<std::string>& named) {
    PassResult r;
    ir::Block* top = g_.block();
    std::vector<ir::Node*> order;
    for (ir::Node* n : *top) order.push_back(n);
    const std::map<size_t, std::vector<ir::Node*>> members = regions();
    if (members.empty()) return r;
    std::set<const ir::Node*> converted;
    for (auto& [root, nodes] : members) {
      int64_t convs = 0;
      for (ir::Node* n : nodes) convs += isConv2dForm(n) ? 1 : 0;
      if (convs < minConvs_) {
        ctx_.decline(pass_, nodes.front(),
                     fmt::format("a region of {} conv{} (min-convs={}): the entry and exit reorders cost more",
                                 convs, convs == 1 ? "" : "s", minConvs_));
        continue;
      }
      if (!named.empty() && !named.count(nodes.front()->output()->name())) {
        ctx_.decline(pass_, nodes.front(), "its region is not named in regions=");
        continue;
      }
      for (ir::Node* n : nodes) converted.insert(n);
      r.count("regions");
      r.count("convs", convs);
      if (ctx_.explain)
        *ctx_.explain << pass_ << ": region from %" << nodes.front()->output()->name()
                      << (nodes.front()->scope().empty() ? "" : " (" + nodes.front()->scope() + ")") << ": " << convs
                      << " convs, " << nodes.size() << " ops on oneDNN tensors\n";
    }
    if (converted.empty()) return r;

    // 2. Rewrite: entries, packed weights, exits.
    ir::Rewriter rw(g_, ctx_.edits, pass_);
    std::map<ir::Value*, ir::Value*> entry;  // dense value -> its to_mkldnn
    for (ir::Node* n : order) {
      if (!converted.count(n)) continue;
      auto isBlocked = [&](const ir::Value* v) { return v && v->node() && converted.count(v->node()); };
      if (auto c = ir::Conv2dKernelOp::match(n)) {
        ir::Value* x = c->input().value();
        if (!isBlocked(x)) {
          // One entry per dense value, unless it is written in place
          // (then each conv converts it where it reads it).
          ir::Value* fresh = nullptr;
          auto& e = mutation_.mayBeWritten(x) ? fresh : entry[x];
          if (!e) {
            e = rw.call(n, "aten::to_mkldnn", withDefaults("aten::to_mkldnn", {x}));
            ir::TensorMeta m = x->meta();
            m.memoryFormat.reset();
            rw.setMeta(e, m);
            r.count("entries");
          }
          x = e;
        }
        ir::Value* wm = rw.call(n, "aten::to_mkldnn", withDefaults("aten::to_mkldnn", {c->weight()}));
        std::vector<ir::Arg> reorderArgs{wm};
        for (const ir::Arg& a : c->reorderGeometry()) reorderArgs.push_back(a);
        ir::Value* packed = rw.call(n, "aten::mkldnn_reorder_conv2d_weight", std::move(reorderArgs));
        ir::Node* k = g_.createCall("aten::mkldnn_convolution", c->mkldnnConvolutionArgs(ir::Arg(x), ir::Arg(packed)),
                                    {c10::TensorType::get()});
        k->setScope(n->scope());
        k->output()->meta() = n->output()->meta();  // lint: detached (its insert is the edit)
        k->output()->meta().memoryFormat.reset();  // lint: detached (its insert is the edit)
        k->setProvenance(pass_);
        rw.insert(k, n);
        converted.insert(k);
        retarget(rw, n, k->output(), converted);
      } else if (n->is("aten::_add_relu") || n->is("aten::_add_relu_")) {
        // add then relu (in place when it was): oneDNN tensors have no fused _add_relu.
        const auto add = ir::AddOp::match(n);
        const bool inPlace = add->inPlace();
        std::vector<ir::Arg> addArgs{add->arg("self"), add->arg("other")};
        if (add->has("alpha")) addArgs.push_back(add->arg("alpha"));
        ir::Value* sum = rw.call(n, inPlace ? "aten::add_" : "aten::add", std::move(addArgs));
        rw.setMeta(sum, n->output()->meta());
        converted.insert(sum->node());
        ir::Value* relu = rw.call(n, inPlace ? "aten::relu_" : "aten::relu", {sum});
        rw.setMeta(relu, n->output()->meta());
        converted.insert(relu->node());
        retarget(rw, n, relu, converted);
      } else if (n->is("aten::silu") || n->is("aten::silu_")) {
        // x * sigmoid(x): oneDNN tensors have sigmoid and mul, not silu (the
        // in-place form was its input's only reader).
        ir::Value* x = ir::OpView::of(n).value("self");
        ir::Value* gate = rw.call(n, "aten::sigmoid", {x});
        rw.setMeta(gate, n->output()->meta());
        converted.insert(gate->node());
        ir::Value* product = rw.call(n, "aten::mul", {x, gate});
        rw.setMeta(product, n->output()->meta());
        converted.insert(product->node());
        retarget(rw, n, product, converted);
      }
    }
    // Exits: every use outside the regions reads a dense copy.
    std::vector<ir::Node*> now;
    for (ir::Node* n : *top) now.push_back(n);
    for (ir::Node* n : now) {
      if (!converted.count(n) || n->is("aten::to_mkldnn") || n->is("aten::mkldnn_reorder_conv2d_weight")) continue;
      ir::Value* v = n->output();
      bool outside = false;
      for (const ir::Use& u : v->uses()) outside = outside || !converted.count(u.user);
      if (!outside) continue;
      ir::Node* dense = g_.createCall("aten::to_dense", withDefaults("aten::to_dense", {v}), {c10::TensorType::get()});
      dense->output()->meta() = v->meta();  // lint: detached (its insert is the edit)
      dense->output()->meta().memoryFormat = c10::MemoryFormat::Contiguous;  // lint: detached (its insert is the edit)
      rw.insertAfter(dense, n);
      rw.replaceUsesIf(v, dense->output(), [&](const ir::Use& u) { return u.user != dense && !converted.count(u.user); });
      r.count("exits");
    }
    r.changed = rw.changed();
    return r;
  }

 private:
  // The tensor inputs of `n` when it is an op oneDNN tensors support and its
  // other arguments fit; nullopt otherwise.
  std::optional<std::vector<const ir::Value*>> memberInputs(const ir::Node* n) const {
    const ir::OpView op = ir::OpView::of(const_cast<ir::Node*>(n));
    auto tensor = [&](const char* name) -> const ir::Value* {
      const ir::Value* v = op.has(name) ? op.value(name) : nullptr;
      return cpuFloat4d(v) ? v : nullptr;
    };
    auto onlyUser = [&](const char* name) { return tensor(name) && tensor(name)->uses().size() == 1; };
    auto allOnes = [](const std::optional<std::vector<int64_t>>& l) {
      return l && std::all_of(l->begin(), l->end(), [](int64_t d) { return d == 1; });
    };
    if (n->is("aten::relu") || n->is("aten::sigmoid") || n->is("aten::silu")) {
      if (tensor("self")) return std::vector<const ir::Value*>{tensor("self")};
    } else if (n->is("aten::relu_") || n->is("aten::silu_")) {
      if (onlyUser("self")) return std::vector<const ir::Value*>{tensor("self")};
    } else if (n->is("aten::gelu")) {
      const ir::Literal* approx = op.literal("approximate");
      if (tensor("self") && (!op.has("approximate") ||
                             (approx && approx->is<std::string>() && approx->as<std::string>() == "none")))
        return std::vector<const ir::Value*>{tensor("self")};
    } else if (auto add = ir::AddOp::match(n)) {
      if (tensor("self") && tensor("other") && sameShape(tensor("self"), tensor("other")) && add->alpha() == 1.0 &&
          (!add->inPlace() || onlyUser("self")))
        return std::vector<const ir::Value*>{tensor("self"), tensor("other")};
    } else if (n->is("aten::mul")) {
      if ((n->overload() == "Tensor" || n->overload().empty()) && tensor("self") && tensor("other") &&
          sameShape(tensor("self"), tensor("other")))
        return std::vector<const ir::Value*>{tensor("self"), tensor("other")};
    } else if (n->is("aten::max_pool2d")) {
      if (tensor("self") && (!op.has("dilation") || allOnes(op.intListArg("dilation"))))
        return std::vector<const ir::Value*>{tensor("self")};
    } else if (n->is("aten::adaptive_avg_pool2d")) {
      // Global pooling only: on oneDNN tensors the input's size must be a
      // multiple of the output's (alexnet's 6x6 after a 1x1 map fails), and
      // only 1x1 divides every size the model may be run with.
      if (tensor("self") && allOnes(op.intListArg("output_size"))) return std::vector<const ir::Value*>{tensor("self")};
    }
    return std::nullopt;
  }

  // `old`'s uses read `with`; `old` is erased.
  static void retarget(ir::Rewriter& rw, ir::Node* old, ir::Value* with, std::set<const ir::Node*>& converted) {
    converted.erase(old);
    rw.replace(old, with);
  }

  // A member's result must not change behind the members' backs: the
  // members read the oneDNN value, everything else a dense copy, so no use
  // may write it (or an alias a use returns: a view), except the one use an
  // in-place member makes of it (relu_, add_, _add_relu_ on it), which is then its only
  // reader and continues the chain.
  static bool resultStaysPut(const ir::Value* v, int depth = 0) {
    if (depth > 8) return false;
    for (const ir::Use& u : v->uses()) {
      const ir::Node* user = u.user;
      if (ir::useMayWrite(u)) {
        if (u.argIndex == 0 && v->uses().size() == 1 &&
            (user->is("aten::relu_") || user->is("aten::add_") || user->is("aten::_add_relu_") ||
             user->is("aten::silu_")))
          continue;
        return false;
      }
      if (!user->isCall()) continue;  // the graph's return, a get_attr: readers only
      const c10::FunctionSchema* schema = user->schema();
      if (!schema) return false;  // unknown aliasing
      for (size_t i = 0; i < schema->returns().size() && i < user->numOutputs(); ++i)
        if (schema->returns()[i].alias_info() && !resultStaysPut(user->output(i), depth + 1)) return false;
    }
    return true;
  }

  ir::Graph& g_;
  PassContext& ctx_;
  std::string pass_;
  int64_t minConvs_;
  ir::MutationAnalysis mutation_;
};

}  // namespace

PassResult OneDnnBlockedPass::run(ir::Graph& graph, PassContext& ctx) {
  ir::Block* top = graph.block();
  if (ctx.targetDevice != "cpu") {
    ctx.decline(name(), top->outputNode(), "the target is " + ctx.targetDevice + ": oneDNN tensors are CPU tensors");
    return unchanged();
  }
  for (const char* op : {"aten::to_mkldnn", "aten::to_dense", "aten::mkldnn_reorder_conv2d_weight",
                         "aten::mkldnn_convolution"})
    if (!ir::findSchema(op, "")) {
      ctx.decline(name(), top->outputNode(), std::string("this LibTorch has no ") + op);
      return unchanged();
    }
  return Converter(graph, ctx, name(), options().getInt("min-convs"))
      .run(rewriters::parseNameList(options().getString("regions")));
}

std::vector<BlockedRegion> oneDnnBlockedRegions(ir::Graph& graph, int64_t minConvs) {
  rewriters::PassContext scratch;
  return Converter(graph, scratch, "onednn-blocked", minConvs).listed();
}

void raiseBlockedRegions(ir::Graph& g) {
  ir::Rewriter rw(g, nullptr, "onednn-blocked");
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : *g.block()) nodes.push_back(n);
  auto producedBy = [](const ir::Value* v, const char* op) {
    return v && v->node() && v->node()->is(op) ? v->node() : nullptr;
  };
  auto self = [](ir::Node* n) { return ir::OpView::of(n).value("self"); };
  for (ir::Node* n : nodes) {
    if (!n->is("aten::mkldnn_convolution")) continue;
    const ir::OpView conv = ir::OpView::of(n);
    if (ir::Node* reorder = producedBy(conv.value("weight"), "aten::mkldnn_reorder_conv2d_weight"))
      if (ir::Node* toMkldnn = producedBy(self(reorder), "aten::to_mkldnn"))
        if (ir::Value* dense = self(toMkldnn)) rw.setArg(n, conv.index("weight"), dense);
  }
  // silu's decomposition (x * sigmoid(x)) back to silu.
  for (ir::Node* n : nodes) {
    if (!n->is("aten::mul")) continue;
    const ir::OpView mul = ir::OpView::of(n);
    ir::Value* x = mul.value("self");
    ir::Node* gate = producedBy(mul.value("other"), "aten::sigmoid");
    if (!x || !gate || self(gate) != x || gate->output()->uses().size() != 1) continue;
    ir::Value* silu = rw.call(n, "aten::silu", {x});
    silu->node()->setScope(n->scope());
    rw.setMeta(silu, n->output()->meta());
    rw.replace(n, silu);
    rw.erase(gate);
  }
  nodes.clear();
  for (ir::Node* n : *g.block()) nodes.push_back(n);
  // Within a region every in-place op was its value's only reader, so
  // dropping the exits' copies changes nothing.
  std::set<const ir::Node*> gone;
  for (ir::Node* n : nodes) {
    const bool exit = n->is("aten::to_dense");
    const bool entry = n->is("aten::to_mkldnn") && self(n) && self(n)->node() &&
                       self(n)->node()->opcode() != ir::Opcode::GetAttr;
    if (ir::Value* input = (exit || entry) ? self(n) : nullptr) {
      gone.insert(n);
      rw.replace(n, input);
    }
  }
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    ir::Node* n = *it;
    if (gone.count(n)) continue;
    if ((n->is("aten::mkldnn_reorder_conv2d_weight") || n->is("aten::to_mkldnn")) && !n->output()->hasUses())
      rw.erase(n);
  }
}

}  // namespace ptopt::layout
