#include "layout/channels_last.h"

#include "ir/interpreter.h"
#include "ir/op_views.h"
#include "ir/rewriter.h"
#include "layout/channels_last_plan.h"
#include "layout/op_layout_table.h"
#include "rewriters/constants.h"
#include "rewriters/name_list.h"
#include "target/capabilities.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::layout {

using rewriters::OptionKind;
using rewriters::PassContext;
using rewriters::PassResult;

std::vector<rewriters::OptionSpec> ChannelsLastPass::optionSpecs() const {
  return {
      {"mode", OptionKind::Enum, "auto", "auto: per region when it pays; on: every conv region; off: nothing",
       {"auto", "on", "off"}, {}, {}},
      {"keep-output-layout", OptionKind::Bool, "true", "convert outputs back to the contiguous format", {}, {}, {}},
      {"regions", OptionKind::String, "",
       "convert only these regions (their first conv's result names, ';'-separated); empty: every region", {}, {},
       {}},
  };
}

namespace {

// `aten::contiguous(v, format)` before `before` (or after `after`), with v's
// metadata in the new format, named `<v>.nchw` / `<v>.nhwc`.
ir::Value* convert(ir::Rewriter& rw, ir::Value* v, c10::MemoryFormat format, ir::Node* before, ir::Node* after) {
  ir::Node* c = rw.graph().createCall("aten::contiguous", {v, format}, {c10::TensorType::get()});
  ir::Value* out = c->output();
  out->meta() = v->meta();  // lint: detached (its insert is the edit)
  if (!out->meta().empty()) out->meta().memoryFormat = format;  // lint: detached (its insert is the edit)
  if (!v->name().empty()) out->setName(v->name() + (format == c10::MemoryFormat::Contiguous ? ".nchw" : ".nhwc"));
  const ir::Node* site = before ? before : after;
  c->setScope(site->scope());
  c->setSourceLocation(site->sourceLocation());
  if (before) rw.insert(c, before);
  else rw.insertAfter(c, after);
  return out;
}

// `m` with the memory format set (metadata left empty stays empty).
ir::TensorMeta withFormat(ir::TensorMeta m, c10::MemoryFormat format) {
  if (!m.empty()) m.memoryFormat = format;
  return m;
}

// True when `user` only passes its operand on to the graph outputs: the
// output node itself, or tuples whose every use is (recursively) an output.
bool onlyReachesOutputs(const ir::Node* user) {
  if (user->opcode() == ir::Opcode::Output) return true;
  if (!user->is("prim::TupleConstruct")) return false;
  for (const ir::Use& u : user->output()->uses())
    if (!onlyReachesOutputs(u.user)) return false;
  return user->output()->hasUses();
}

// Erases the get_attr behind `v` when nothing reads it; the constant stays
// in the table (another method of the model may read it).
void eraseGetAttrIfUnused(ir::Rewriter& rw, ir::Value* v) {
  if (v && !v->hasUses() && v->node() && v->node()->opcode() == ir::Opcode::GetAttr) rw.erase(v->node());
}

}  // namespace

std::string regionLabel(const std::string& id, size_t convs, const ir::Node* firstConv) {
  std::string s = "region %" + id + " (" + std::to_string(convs) + " conv" + (convs == 1 ? "" : "s");
  if (firstConv && !firstConv->scope().empty()) s += ", from " + firstConv->scope();
  return s + ")";
}

PassResult ChannelsLastPass::run(ir::Graph& graph, PassContext& ctx) {
  using namespace nhwc;  // the analysis (channels_last_plan.h)
  const std::string mode = options().getString("mode");
  const bool keepOutputLayout = options().getBool("keep-output-layout");
  std::optional<std::set<std::string>> listed;
  if (const std::string& text = options().getString("regions"); !text.empty()) listed = rewriters::parseNameList(text);
  ir::Block* top = graph.block();
  if (mode == "off") {
    ctx.decline(name(), top->outputNode(), "mode=off");
    return unchanged();
  }
  const ir::MutationAnalysis mutation(graph);
  PassResult r;
  Plan p = plan(graph, ctx, name(), mode, listed, mutation, r);
  if (p.selected.empty()) return r;
  const std::vector<Anchor>& anchors = p.anchors;
  const std::unordered_map<const ir::Node*, const Anchor*>& selected = p.selected;
  const std::unordered_set<const ir::Value*>& pinned = p.pinned;
  const Analysis& a = p.a;
  r.count("regions", static_cast<int64_t>(p.regions.size()));
  if (ctx.explain)
    for (const RegionStats& s : p.regions)
      *ctx.explain << name() << ": converting " << regionLabel(s.id, s.convs, s.anchors.front()->node)
                   << (mode == "auto" ? ", mode=auto: it pays" : "") << (listed ? ", named in regions=" : "") << "\n";
  ir::Rewriter rw(graph, ctx.edits, name());

  // 1. Weights stored channels-last, as new constants (`conv1.weight_nhwc`):
  // the old tensor may still be read by another method sharing the table.
  // A weight that a conv outside the regions also reads stays as it is
  // (ATen's conv would return channels-last there too).
  std::map<ir::Value*, ir::Value*> storedAs;
  for (const auto& an : anchors) {
    if (!selected.count(an.node)) continue;
    ir::Value* w = an.node->arg(an.weightIndex).value();
    if (storedAs.count(w)) {
      if (storedAs.at(w)) rw.setArg(an.node, an.weightIndex, storedAs.at(w));
      continue;
    }
    const auto format = channelsLastFor(an.rank);
    bool onlyAnchors = true;
    for (const ir::Use& u : w->uses()) {
      auto user = selected.find(u.user);
      onlyAnchors = onlyAnchors && user != selected.end() && u.argIndex == user->second->weightIndex;
    }
    if (!onlyAnchors || an.weight.is_contiguous(format)) {
      if (!onlyAnchors) ctx.decline(name(), an.node, "the weight is shared with a conv outside the regions: kept contiguous");
      storedAs[w] = nullptr;
      continue;
    }
    const std::string constName = w->node()->target();
    ir::Value* nw = rw.addConstant(constName + "_nhwc", an.weight.contiguous(format), w->node());
    rw.setMeta(nw, withFormat(w->meta(), format));
    storedAs[w] = nw;
    rw.setArg(an.node, an.weightIndex, nw);
    r.count("weights");
  }
  for (const auto& [w, nw] : storedAs)
    if (nw) eraseGetAttrIfUnused(rw, w);
  r.count("convs", static_cast<int64_t>(selected.size()));

  // 2. Permutes back to NCHW start a region through a (usually free) conversion.
  std::unordered_map<const ir::Value*, int64_t> region = a.region;
  for (const ir::Node* src : a.sources) {
    ir::Value* p = src->output();
    const int64_t rank = region.at(p);
    ir::Value* q = convert(rw, p, channelsLastFor(rank), nullptr, const_cast<ir::Node*>(src));
    rw.replaceUsesIf(p, q, [&](const ir::Use& u) { return u.user != q->node(); });
    region.erase(p);
    region[q] = rank;
    r.count("entries");
  }

  // 3. Entry conversions, shared unless the value may be written in between.
  std::unordered_map<const ir::Value*, ir::Value*> entryOf;
  for (const auto& entry : a.entries) {
    ir::Node* user = entry.first;  // not a structured binding: the lambda below captures it
    const size_t arg = entry.second;
    ir::Value* v = user->arg(arg).value();
    const int64_t want = [&] {
      const ir::Node* consumer = user->is("prim::ListConstruct") ? user->output()->uses().front().user : user;
      for (const auto& out : consumer->outputs())
        if (region.count(out.get())) return region.at(out.get());
      return int64_t{4};
    }();
    ir::Value* converted = nullptr;
    const bool shareable = !mutation.mayBeWritten(v);
    if (shareable && entryOf.count(v)) converted = entryOf.at(v);
    else {
      converted = convert(rw, v, channelsLastFor(want), user, nullptr);
      if (shareable) entryOf[v] = converted;
      r.count("entries");
    }
    rw.setArg(user, arg, converted);
  }

  // 4. Pinned values: back to NCHW right after their definition.
  for (const ir::Value* cv : pinned) {
    ir::Value* v = const_cast<ir::Value*>(cv);
    if (!v->node() || !a.clNodes.count(v->node())) continue;
    ir::Value* n = convert(rw, v, c10::MemoryFormat::Contiguous, nullptr, v->node());
    rw.replaceUsesIf(v, n, [&](const ir::Use& u) { return u.user != n->node(); });
    if (v->meta().shape) {
      ir::TensorMeta m = v->meta();
      m.memoryFormat = channelsLastFor(static_cast<int64_t>(v->meta().shape->size()));
      rw.setMeta(v, m);
    }
    r.count("pinned");
  }

  // 5. Exit conversions before breakers (and outputs), one per value.
  std::unordered_map<const ir::Node*, size_t> position;
  {
    size_t i = 0;
    for (ir::Node* n : top->nodes()) position[n] = i++;
  }
  std::vector<ir::Value*> regionValues;
  for (const auto& [v, rank] : region) regionValues.push_back(const_cast<ir::Value*>(v));
  std::sort(regionValues.begin(), regionValues.end(),
            [&](ir::Value* x, ir::Value* y) { return position[x->node()] < position[y->node()]; });
  for (ir::Value* v : regionValues) {
    const int64_t rank = region.at(v);
    rw.setMeta(v, withFormat(v->meta(), channelsLastFor(rank)));
    std::vector<ir::Use> exits;
    ir::Node* first = nullptr;
    for (const ir::Use& u : v->uses()) {
      if (a.regionDataUses.count({u.user, u.argIndex})) continue;
      ir::Node* owner = u.user->ancestorIn(top);
      if (!owner) continue;
      if (!keepOutputLayout && u.user == owner && onlyReachesOutputs(owner)) continue;
      if (owner->isCall() && owner->blocks().empty() && classifyOp(owner, rank).cls == LayoutClass::Sink) continue;
      exits.push_back(u);
      if (!first || position[owner] < position[first]) first = owner;
    }
    if (exits.empty()) continue;
    ir::Value* n = convert(rw, v, c10::MemoryFormat::Contiguous, first, nullptr);
    for (const ir::Use& u : exits) rw.setArg(u.user, u.argIndex, n);
    r.count("exits");
  }

  // 6. Adjacent conversions collapse.
  for (ir::Node* n : top->nodes()) {
    if (!n->isAttached()) continue;
    const auto outer = conversion(n);
    if (!outer) continue;
    ir::Value* in = outer->self();
    ir::Node* innerNode = in ? in->node() : nullptr;
    const auto inner = innerNode ? conversion(innerNode) : std::nullopt;
    if (!inner || mutation.mayBeWritten(in)) continue;
    ir::Value* source = inner->self();
    if (!source || mutation.mayBeWritten(source)) continue;
    if (*inner->memoryFormat() == *outer->memoryFormat()) {
      rw.replace(n, in);  // the same format twice
    } else {
      rw.setArg(n, outer->index("self"), source);
      if (!in->hasUses()) rw.erase(innerNode);
    }
    r.count("cancelled");
  }
  r.changed = rw.changed();
  return r;
}

std::vector<ChannelsLastRegion> channelsLastRegions(ir::Graph& graph, const PassContext& ctx) {
  using namespace nhwc;
  PassContext scratch;  // the declines of this look are nobody's business
  scratch.targetDevice = ctx.targetDevice;
  scratch.preferBf16 = ctx.preferBf16;
  const ir::MutationAnalysis mutation(graph);
  PassResult r;
  const Plan p = plan(graph, scratch, "channels-last", "on", std::nullopt, mutation, r);
  std::vector<ChannelsLastRegion> out;
  for (const RegionStats& s : p.regions) {
    ChannelsLastRegion region;
    region.id = s.id;
    region.nodes = s.nodes;
    for (const Anchor* an : s.anchors) region.convs.push_back(an->node);
    region.autoDecline = autoDecline(s);
    out.push_back(std::move(region));
  }
  return out;
}

}  // namespace ptopt::layout
