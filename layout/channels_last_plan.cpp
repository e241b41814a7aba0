// channels-last's analysis (layout/channels_last_plan.h).
#include "layout/channels_last_plan.h"

#include "layout/channels_last.h"
#include "layout/op_layout_table.h"
#include "rewriters/constants.h"
#include "target/capabilities.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

namespace ptopt::layout::nhwc {

using rewriters::PassContext;
using rewriters::PassResult;

c10::MemoryFormat channelsLastFor(int64_t rank) {
  return rank == 5 ? c10::MemoryFormat::ChannelsLast3d : c10::MemoryFormat::ChannelsLast;
}

std::vector<int64_t> toNhwc(int64_t rank) { return rank == 5 ? std::vector<int64_t>{0, 2, 3, 4, 1} : std::vector<int64_t>{0, 2, 3, 1}; }
std::vector<int64_t> toNchw(int64_t rank) { return rank == 5 ? std::vector<int64_t>{0, 4, 1, 2, 3} : std::vector<int64_t>{0, 3, 1, 2}; }

std::optional<ir::LayoutOp> conversion(ir::Node* n) {
  auto op = ir::LayoutOp::match(n);
  if (!op || !n->is("aten::contiguous") || n->numArgs() != 2 || !op->memoryFormat()) return std::nullopt;
  return op;
}

std::optional<ir::LayoutOp> permute(ir::Node* n) {
  auto op = ir::LayoutOp::match(n);
  if (!op || !n->is("aten::permute") || n->numArgs() != 2 || !op->dims()) return std::nullopt;
  return op;
}

namespace {

// The operand position of every user that reads a permuted value in
// usersMakeFreshTensors (self/input of layer_norm, linear, matmul, permute
// and the metadata sinks).
constexpr size_t kFirstOperand = 0;

class Analyzer {
 public:
  Analyzer(ir::Block* top, const ir::MutationAnalysis& mutation) : top_(top), mutation_(mutation) {}

  Analysis run(const std::unordered_map<const ir::Node*, const Anchor*>& selected,
               const std::unordered_set<const ir::Value*>& pinned,
               const std::unordered_set<const ir::Node*>& excludedSources) {
    Analysis a;
    std::unordered_map<const ir::Value*, int64_t> rankHints;
    auto knownRank = [&](const ir::Value* v) -> std::optional<int64_t> {
      auto r = a.region.find(v);
      if (r != a.region.end()) return r->second;
      if (v->meta().shape) return static_cast<int64_t>(v->meta().shape->size());
      if (auto c = rewriters::constantTensor(v)) return c->dim();
      auto h = rankHints.find(v);
      if (h != rankHints.end()) return h->second;
      return std::nullopt;
    };
    auto markRegion = [&](ir::Node* n, int64_t rank) {
      a.clNodes.insert(n);
      for (const auto& out : n->outputs()) {
        if (!out->isTensor()) continue;
        if (pinned.count(out.get())) rankHints[out.get()] = rank;
        else a.region[out.get()] = rank;
      }
    };

    for (ir::Node* n : top_->nodes()) {
      if (!n->isCall() || !n->blocks().empty()) continue;
      if (auto p = permute(n)) {
        const std::vector<int64_t> dims = *p->dims();
        rankHints[n->output()] = static_cast<int64_t>(dims.size());
        ir::Value* in = p->self();
        auto r = in ? a.region.find(in) : a.region.end();
        if (r != a.region.end() && dims == toNhwc(r->second) && usersMakeFreshTensors(n->output())) {
          a.freePermutes.insert(n);
          a.regionDataUses.insert({n, p->index("self")});
        } else if (r == a.region.end() && in && (dims == toNchw(4) || dims == toNchw(5)) &&
                   !mutation_.mayBeWritten(n->output()) && !pinned.count(n->output()) &&
                   !excludedSources.count(n)) {
          a.sources.insert(n);
          markRegion(n, static_cast<int64_t>(dims.size()));
        }
        continue;
      }
      auto sel = selected.find(n);
      if (sel != selected.end()) {
        const Anchor& anchor = *sel->second;
        ir::Value* in = n->arg(anchor.inputIndex).value();
        if (in && a.region.count(in)) a.regionDataUses.insert({n, anchor.inputIndex});
        else if (in && knownRank(in) == anchor.rank) a.entries.push_back({n, anchor.inputIndex});
        markRegion(n, anchor.rank);
        continue;
      }
      // Preserving ops join when a data operand is channels-last.
      int64_t rank = 4;
      for (const auto& arg : n->args())
        if (arg.isValue() && a.region.count(arg.value())) { rank = a.region.at(arg.value()); break; }
      OpLayout op = classifyOp(n, rank);
      if (op.cls != LayoutClass::Preserving) continue;
      std::vector<std::pair<ir::Node*, size_t>> operands;
      if (op.tensorList) {
        ir::Value* list = n->arg(op.dataArgs.front()).value();
        ir::Node* ln = list ? list->node() : nullptr;
        if (!ln || !ln->is("prim::ListConstruct") || ln->owningBlock() != top_ || list->uses().size() != 1) continue;
        for (size_t i = 0; i < ln->numArgs(); ++i) operands.push_back({ln, i});
      } else {
        for (size_t i : op.dataArgs)
          if (i < n->numArgs()) operands.push_back({n, i});
      }
      bool anyRegion = false, ok = true;
      std::vector<std::pair<ir::Node*, size_t>> regionUses, converts;
      for (const auto& [holder, i] : operands) {
        const ir::Arg& arg = holder->arg(i);
        ir::Value* v = arg.value();
        if (!v || !v->isTensor()) continue;  // literals and scalars broadcast
        auto r = a.region.find(v);
        if (r != a.region.end()) {
          if (r->second != rank) { ok = false; break; }
          anyRegion = true;
          regionUses.push_back({holder, i});
          continue;
        }
        if (op.inPlace && holder == n && i == 0) { ok = false; break; }  // never convert what is written
        auto vr = knownRank(v);
        if (!vr || *vr > rank) { ok = false; break; }
        if (*vr < rank || spatiallyBroadcast(v)) continue;  // broadcast-safe
        converts.push_back({holder, i});
      }
      if (!ok || !anyRegion) continue;
      for (const auto& u : regionUses) a.regionDataUses.insert(u);
      for (const auto& c : converts) a.entries.push_back(c);
      markRegion(n, rank);
    }
    return a;
  }

 private:
  // Every user produces a fresh contiguous tensor whatever the input's
  // strides (or permutes straight back), so nobody can observe that the
  // permuted view is contiguous here where it was strided before.
  bool usersMakeFreshTensors(const ir::Value* v) const {
    if (mutation_.mayBeWritten(v)) return false;
    for (const ir::Use& u : v->uses()) {
      const ir::Node* user = u.user;
      if (user->owningBlock() != top_ || u.argIndex != kFirstOperand) return false;
      if (user->is("aten::layer_norm") || user->is("aten::linear") || user->is("aten::matmul")) continue;
      if (auto p = permute(const_cast<ir::Node*>(user)); p && (*p->dims() == toNchw(4) || *p->dims() == toNchw(5)))
        continue;
      if (classifyOp(user, 4).cls == LayoutClass::Sink) continue;
      return false;
    }
    return true;
  }

  // A same-rank tensor whose spatial dims are all 1 ([1, C, 1, 1]) never
  // decides the layout of a broadcasting result: known from a constant's
  // shape or from metadata.
  static bool spatiallyBroadcast(const ir::Value* v) {
    std::vector<int64_t> shape;
    if (auto c = rewriters::constantTensor(v)) shape = c->sizes().vec();
    else if (v->meta().shape) shape = *v->meta().shape;
    else return false;
    for (size_t d = 2; d < shape.size(); ++d)
      if (shape[d] != 1) return false;
    return true;
  }

  ir::Block* top_;
  const ir::MutationAnalysis& mutation_;
};

// Region values that may be written in place and that some non-region user
// reads: they are converted right after their definition.
std::unordered_set<const ir::Value*> valuesToPin(const Analysis& a, const ir::MutationAnalysis& mutation,
                                                 ir::Block* top) {
  std::unordered_set<const ir::Value*> pins;
  for (const auto& [v, rank] : a.region) {
    if (!mutation.mayBeWritten(v)) continue;
    for (const ir::Use& u : v->uses()) {
      if (a.regionDataUses.count({u.user, u.argIndex})) continue;
      const ir::Node* owner = u.user->ancestorIn(top);
      if (owner && owner->isCall() && owner->blocks().empty() && classifyOp(owner, rank).cls == LayoutClass::Sink) continue;
      pins.insert(v);
      break;
    }
  }
  return pins;
}

// Connected components of the channels-last nodes, keyed by a representative.
std::map<const ir::Node*, RegionStats> regions(const Analysis& a,
                                               const std::unordered_map<const ir::Node*, const Anchor*>& selected) {
  std::unordered_map<const ir::Node*, const ir::Node*> parent;
  std::function<const ir::Node*(const ir::Node*)> find = [&](const ir::Node* n) {
    auto it = parent.find(n);
    if (it == parent.end() || it->second == n) return n;
    const ir::Node* root = find(it->second);
    parent[n] = root;
    return root;
  };
  auto unite = [&](const ir::Node* x, const ir::Node* y) { parent[find(x)] = find(y); };
  for (const ir::Node* n : a.clNodes) parent.emplace(n, n);
  for (const auto& [user, arg] : a.regionDataUses) {
    const ir::Value* v = user->arg(arg).value();
    if (!v || !v->node()) continue;
    const ir::Node* consumer = user->is("prim::ListConstruct") ? user->output()->uses().front().user : user;
    if (a.clNodes.count(consumer) && a.clNodes.count(v->node())) unite(consumer, v->node());
  }
  std::map<const ir::Node*, RegionStats> out;
  for (const ir::Node* n : a.clNodes) {
    RegionStats& s = out[find(n)];
    s.nodes.push_back(n);
    if (a.sources.count(n)) s.sources.push_back(n);
    auto sel = selected.find(n);
    if (sel == selected.end()) continue;
    const Anchor& an = *sel->second;
    s.anchors.push_back(&an);
    ++s.convs;
    const bool transposed = an.transposed;
    const int64_t cout = transposed ? an.weight.size(1) * an.groups : an.weight.size(0);
    const int64_t cin = transposed ? an.weight.size(0) : an.weight.size(1) * an.groups;
    if (cin > 16 || cout > 16) ++s.largeConvs;
    double area = 1;
    if (n->output()->meta().shape && static_cast<int64_t>(n->output()->meta().shape->size()) == an.rank) {
      const auto& shape = *n->output()->meta().shape;
      int64_t pixels = std::accumulate(shape.begin() + 2, shape.end(), int64_t{1}, std::multiplies<>());
      area = static_cast<double>(pixels);
      s.maxOutputArea = std::max(s.maxOutputArea.value_or(0), pixels);
    }
    const double macs = static_cast<double>(an.weight.numel()) * area;
    s.macs += macs;
    const int64_t perGroupIn = transposed ? an.weight.size(0) / an.groups : an.weight.size(1);
    if (an.groups > 1 && perGroupIn > 1) s.groupedMacs += macs;
  }
  return out;
}

}  // namespace

std::string autoDecline(const RegionStats& s) {
  if (s.convs < 2) return "only " + std::to_string(s.convs) + " conv in the region: the conversions cost more than it saves";
  if (s.largeConvs == 0) return "every conv in the region has <= 16 channels (measured slower in channels-last)";
  if (s.maxOutputArea && *s.maxOutputArea <= 64)
    return "tiny spatial sizes (largest conv output " + std::to_string(*s.maxOutputArea) + " pixels)";
  if (s.groupedMacs > 0.5 * s.macs) return "grouped convs with several channels per group carry most of the work";
  return "";
}

Plan plan(ir::Graph& graph, PassContext& ctx, const std::string& pass, const std::string& mode,
          const std::optional<std::set<std::string>>& listed, const ir::MutationAnalysis& mutation, PassResult& r) {
  Plan p;
  ir::Block* top = graph.block();
  graph.walk([&](ir::Node* n) {
    if (!ir::ConvOp::isConv(n)) return;
    const auto conv = ir::ConvOp::match(n);
    if (!conv) return ctx.decline(pass, n, "the conv's transposed flag or groups is computed at run time");
    ir::Value* w = conv->weight();
    auto weight = w ? rewriters::constantTensor(w) : std::nullopt;
    if (!weight) return ctx.decline(pass, n, "the conv weight is not a constant");
    const int64_t rank = weight->dim();
    if (rank != 4 && rank != 5)
      return ctx.decline(pass, n, "a " + std::to_string(rank - 2) + "-D conv: channels-last needs 4-D or 5-D");
    if (n->owningBlock() != top) return ctx.decline(pass, n, "inside a control-flow block (left intact)");
    if (rewriters::isWrittenAnywhere(w)) return ctx.decline(pass, n, "the weight is written in place");
    // Which conv kinds the target computes in channels-last
    // (target/capabilities.h: probed on a CPU target; cuDNN's rule, or a
    // probe on the GPU, for a CUDA target).
    if (std::string why; !target::convRunsChannelsLast(ctx.targetDevice, conv->transposed(), rank, &why))
      return ctx.decline(pass, n, why);
    p.anchors.push_back({n, rank, *weight, conv->groups(), conv->transposed(), conv->index("input"), conv->weightIndex()});
  });
  if (p.anchors.empty()) return p;

  Analyzer analyzer(top, mutation);
  for (const auto& an : p.anchors) p.selected[an.node] = &an;
  std::unordered_set<const ir::Node*> excludedSources;
  std::unordered_map<const ir::Node*, size_t> programOrder;  // nested blocks included
  graph.walk([&](ir::Node* n) { programOrder.emplace(n, programOrder.size()); });
  // Each anchor keeps the name of the region it was first found in, so that
  // a region that splits once another is dropped (pins cleared) still
  // answers to its name.
  std::unordered_map<const ir::Node*, std::string> regionOf;
  std::set<std::string> names;
  // Regions in program order of their first conv, each named by that conv,
  // so that --explain and regions= read the same on every run (the regions
  // are keyed by node addresses).
  auto ordered = [&] {
    std::vector<RegionStats> out;
    for (auto& [rep, stats] : regions(p.a, p.selected)) {
      auto byOrder = [&](const ir::Node* x, const ir::Node* y) { return programOrder.at(x) < programOrder.at(y); };
      std::sort(stats.anchors.begin(), stats.anchors.end(),
                [&](const Anchor* x, const Anchor* y) { return byOrder(x->node, y->node); });
      std::sort(stats.nodes.begin(), stats.nodes.end(), byOrder);
      out.push_back(std::move(stats));
    }
    std::stable_sort(out.begin(), out.end(), [&](const RegionStats& x, const RegionStats& y) {
      if (x.anchors.empty() || y.anchors.empty()) return !x.anchors.empty() && y.anchors.empty();
      return programOrder.at(x.anchors.front()->node) < programOrder.at(y.anchors.front()->node);
    });
    for (RegionStats& s : out) {
      if (s.anchors.empty()) continue;
      const ir::Node* first = s.anchors.front()->node;
      if (!regionOf.count(first)) {
        std::string id = first->output()->name();
        if (id.empty() || names.count(id)) id = "#" + std::to_string(programOrder.at(first));
        names.insert(id);
        for (const Anchor* an : s.anchors) regionOf.emplace(an->node, id);
      }
      s.id = regionOf.at(first);
    }
    return out;
  };
  for (int round = 0; round < 32; ++round) {
    p.a = analyzer.run(p.selected, p.pinned, excludedSources);
    auto more = valuesToPin(p.a, mutation, top);
    bool grew = false;
    for (const ir::Value* v : more) grew |= p.pinned.insert(v).second;
    if (grew) continue;
    bool dropped = false;
    for (const RegionStats& stats : ordered()) {
      // A region needs a conv; regions= must name it; in auto mode it must also pay.
      std::string why;
      bool unselected = false;
      if (stats.anchors.empty()) why = "no conv";
      else if (listed && !listed->count(stats.id)) why = "not named in regions=", unselected = true;
      else if (mode == "auto") why = autoDecline(stats);
      if (why.empty()) continue;
      if (!stats.anchors.empty()) {
        const std::string region = regionLabel(stats.id, stats.convs, stats.anchors.front()->node);
        if (unselected) {
          ctx.decline(pass, stats.anchors.front()->node, region + " " + why);
          r.count("unselected-regions");
        } else {
          ctx.decline(pass, stats.anchors.front()->node, "mode=auto: " + region + ": " + why);
          r.count("declined-regions");
        }
      }
      for (const Anchor* an : stats.anchors) p.selected.erase(an->node);
      for (const ir::Node* src : stats.sources) excludedSources.insert(src);
      dropped = true;
    }
    if (!dropped) break;
    p.pinned.clear();
  }
  if (listed)
    for (const std::string& id : *listed)
      if (!names.count(id))
        ctx.decline(pass, top->outputNode(), "regions= names %" + id + ", which is not the first conv of a region here");
  if (!p.selected.empty()) p.regions = ordered();
  return p;
}

}  // namespace ptopt::layout::nhwc
