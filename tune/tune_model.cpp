#include "tune/tune_model.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "layout/channels_last.h"
#include "quant/cast.h"
#include "quant/precision_policy.h"
#include "rewriters/constants.h"
#include "rewriters/pass_manager.h"
#include "tune/candidates.h"
#include "tune/cache.h"
#include "tune/measuring_device.h"
#include "tune/signature.h"
#include "measure/clock.h"
#include "tune/tuned_kernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <tuple>

namespace ptopt::tune {

using rewriters::Pipeline;
using rewriters::PipelineElement;

nlohmann::json DecisionRecord::toJson() const {
  const char* src = source == Source::Measured ? "measured" : source == Source::Cached ? "cached" : "skipped";
  nlohmann::json j = {{"kind", kind},   {"node", node},   {"signature", signature}, {"choice", choice},
                      {"candidates", candidates}, {"ratio", ratio}, {"low", low}, {"high", high},
                      {"rounds", rounds}, {"seconds", seconds}, {"source", src}, {"challenger", challenger}};
  if (!note.empty()) j["note"] = note;
  for (const auto& [name, why] : out) j["out"][name] = why;
  return j;
}

std::string DecisionRecord::line() const {
  const std::string what = fmt::format("{} {}", kind, node == "model" ? "(whole model)" : "%" + node);
  if (source == Source::Skipped) return fmt::format("{}: kept {} ({})", what, choice, note);
  const std::string how = source == Source::Cached ? "cached" : fmt::format("{} rounds, {:.2f} s", rounds, seconds);
  if (candidates.size() < 2 || challenger.empty()) return fmt::format("{}: {} ({})", what, choice, how);
  if (choice == candidates.front())
    return fmt::format("{}: {} kept ({} {:.2f}x [{:.2f}, {:.2f}], {}; {})", what, choice, challenger, ratio, low, high,
                       low > 1.0 ? "slower" : "no win beyond noise", how);
  return fmt::format("{}: {} {:.2f}x [{:.2f}, {:.2f}] of {} ({})", what, choice, ratio, low, high, candidates.front(),
                     how);
}

std::string TuneResult::summary() const {
  std::map<std::string, std::pair<int, int>> perKind;  // kind -> (rewritten, decided)
  for (const auto& d : decisions) {
    auto& [rewritten, total] = perKind[d.kind];
    ++total;
    if (d.rewrites()) ++rewritten;
  }
  // Kinds decided op by op whose assignment the whole-model check then
  // turned down (preferOpByOp): their per-op choices were not applied.
  std::set<std::string> notApplied;
  for (const auto& d : decisions)
    if (d.node == "model" && d.candidates.size() == 2 && d.candidates.front() == "preset" && !d.rewrites())
      notApplied.insert(d.kind);
  std::string kinds;
  for (const auto& [kind, counts] : perKind)
    kinds += fmt::format("{}{} {}/{}{}", kinds.empty() ? "" : ", ", kind, counts.first, counts.second,
                         notApplied.count(kind) ? " (not applied: the preset's ran as fast)" : "");
  std::string s = fmt::format("tune: {} decisions ({} measured, {} cached, {} skipped) in {:.1f} s of a {:.0f} s budget{}\n",
                              decisions.size(), measured, cached, skipped, seconds, budgetSeconds,
                              budgetSpent ? " (budget spent: the rest kept their baseline)" : "");
  if (!kinds.empty()) s += "tune: rewritten/decided: " + kinds + "\n";
  for (const auto& d : decisions)
    if (d.node == "model" || d.kind == "channels-last" || d.kind == "fuse-cudnn" ||
        (d.rewrites() && d.kind != "conv-kernel" && d.kind != "precision"))
      s += "tune: " + d.line() + "\n";
  // Candidates that cannot run here, once per kind, candidate and reason.
  std::map<std::tuple<std::string, std::string, std::string>, size_t> outHere;
  for (const auto& d : decisions)
    for (const auto& [name, why] : d.out) ++outHere[{d.kind, name, why}];
  for (const auto& [key, count] : outHere) {
    const auto& [kind, name, why] = key;
    s += fmt::format("tune: {} '{}' is out on this machine ({} {}): {}\n", kind, name, count,
                     count == 1 ? "decision" : "decisions", why);
  }
  s += fmt::format("tune: cache {} ({})\n", cachePath.empty() ? "(none)" : cachePath, context);
  for (const auto& w : warnings) s += "tune: warning: " + w + "\n";
  return s;
}

nlohmann::json TuneResult::toJson() const {
  nlohmann::json d = nlohmann::json::array();
  for (const auto& r : decisions) d.push_back(r.toJson());
  return {{"pipeline", rewriters::printPipeline(pipeline)},
          {"context", context},
          {"cache", cachePath},
          {"seconds", seconds},
          {"budget_seconds", budgetSeconds},
          {"budget_spent", budgetSpent},
          {"measured", measured},
          {"cached", cached},
          {"skipped", skipped},
          {"warnings", warnings},
          {"decisions", d}};
}

namespace {

std::string option(const PipelineElement& e, const std::string& key, const std::string& fallback) {
  for (const auto& [k, v] : e.options)
    if (k == key) return v;
  return fallback;
}

void setOption(PipelineElement& e, const std::string& key, const std::string& value) {
  for (auto& [k, v] : e.options)
    if (k == key) {
      v = value;
      return;
    }
  e.options.emplace_back(key, value);
}

void eraseOption(PipelineElement& e, const std::string& key) {
  e.options.erase(std::remove_if(e.options.begin(), e.options.end(), [&](const auto& kv) { return kv.first == key; }),
                  e.options.end());
}

// The first line of an error (c10 errors carry a backtrace after it).
std::string firstLine(const std::string& what) { return what.substr(0, what.find('\n')); }

// The name of a set of channels-last regions as a candidate: "off" or
// "regions=a;b" (the option it becomes).
std::string regionSetName(const std::set<std::string>& on) {
  return on.empty() ? "off" : "regions=" + joinNameList(on);
}

// A whole-model A/B runs every layer per sample: it gets this many ops'
// shares of the budget.
constexpr double kWholeModelWeight = 10.0;

class PipelineTuning {
 public:
  PipelineTuning(const ir::Model& model, const rewriters::PassRegistry& registry, const rewriters::PassContext& base,
          const TuneOptions& o)
      : registry_(registry), o_(o), work_(model.clone()), ctx_(base.forTrial()) {
    if (!o.timer) ownTimer_ = std::make_unique<measure::DeviceClock>(o.device, measure::DeviceClock::Options{true, true});
    timer_ = o.timer ? o.timer : ownTimer_.get();
    start_ = timer_->elapsedSeconds();
    result_.budgetSeconds = o.budgetSeconds;
    result_.cachePath = o.cachePath;
    context_ = CacheContext::current(measuringDevice(o.device).str());
    result_.context = context_.key();
    try {
      cache_ = TuningCache::open(o.cachePath);
    } catch (const CacheError& e) {
      result_.warnings.push_back(std::string(e.what()) + "; starting with an empty cache");
      say("tune: warning: " + result_.warnings.back());
      cache_ = TuningCache(o.cachePath);
    }
  }

  TuneResult run(const Pipeline& pipeline) {
    if (!ctx_.exampleInputs)
      throw std::invalid_argument("--tune measures with the model's real input shapes: give --input-shape or --inputs");
    if (pipeline.empty()) {
      say("tune: the pipeline is empty: nothing to tune");
      result_.pipeline = pipeline;
      return std::move(result_);
    }
    countExpected(pipeline);
    // The kernel is chosen per op signature: without shape-prop the shapes are unknown.
    const bool cpu = ctx_.targetDevice == "cpu" && rewriters::pipelineUses(pipeline, "shape-prop");
    bool kernelsDone = false;
    for (const PipelineElement& e : pipeline.elements) {
      if (e.name == "fuse-cudnn" || e.name == "tuned-kernels") {
        if (cpu && !kernelsDone) decideKernels(), decideBlocked(), decidePrepacked(), kernelsDone = true;
        if (e.name == "fuse-cudnn") decideCudnn(e);
        else keep(e);  // given explicitly: as given
      } else if (e.name == "bn-to-affine") {
        decideBnAffine(e);
      } else if (e.name == "channels-last") {
        decideLayout(e);
      } else if (e.name == "cast") {
        decidePrecision(e);
      } else {
        keep(e);
      }
    }
    if (cpu && !kernelsDone) decideKernels(), decideBlocked(), decidePrepacked();
    try {
      cache_.save();
    } catch (const CacheError& e) {
      result_.warnings.push_back(std::string(e.what()) + " (the decisions of this run are not kept)");
      say("tune: warning: " + result_.warnings.back());
    }
    // Canonical text: options in declaration order.
    result_.pipeline = rewriters::parsePipeline(rewriters::printPipeline(out_), registry_, "--tune");
    result_.seconds = timer_->elapsedSeconds() - start_;
    return std::move(result_);
  }

 private:
  // ---- running elements on the working copy

  void runOn(ir::Model& m, const PipelineElement& e) {
    Pipeline p;
    p.elements.push_back(e);
    rewriters::PassContext ctx = ctx_.forTrial();  // its reports and warnings are not the run's
    ctx.edits.setKeepText(false);
    rewriters::PassManager(registry_, p).run(m, ctx);
  }
  void keep(const PipelineElement& e) {
    runOn(work_, e);
    out_.elements.push_back(e);
  }

  // ---- budget and decisions

  // About how many decisions will be timed: one per conv or linear for the
  // kernel, one more with cast, the whole-model A/Bs. (BatchNorms mostly
  // fold away before bn-to-affine sees them.) Each decision's slice is what
  // is left of the budget over what is left of this count.
  void countExpected(const Pipeline& p) {
    size_t convs = 0;
    work_.forward().walk([&](ir::Node* n) {
      if (ir::ConvOp::isConv(n) || n->is("aten::linear")) ++convs;
    });
    // kernel, prepacking and (with cast) precision per conv or linear
    expected_ = convs * (rewriters::pipelineUses(p, "cast") ? 3 : 2) + 3;
  }
  double remaining() const { return o_.budgetSeconds - (timer_->elapsedSeconds() - start_); }

  // Times `candidates` within this decision's share of what is left of the
  // budget (`weight`: in units of one op's share); nullopt when it is spent.
  std::optional<Choice> timeCandidates(const std::vector<Candidate>& candidates, double weight) {
    const double left = remaining();
    if (left <= 0) {
      result_.budgetSpent = true;
      return std::nullopt;
    }
    TuneLimits limits = o_.limits;
    limits.maxSeconds = std::max(0.05, weight * left / static_cast<double>(std::max<size_t>(1, expected_)));
    limits.maxSeconds = std::min(limits.maxSeconds, left);
    if (expected_ > 1) --expected_;
    return Tuner(*timer_).choose(candidates, limits);
  }

  // Looks `signature` up, else times `candidates` (if the budget allows)
  // and caches the choice. Returns the chosen candidate's name.
  // `weight`: the decision's share of the budget in units of one op's
  // (a whole-model A/B gets kWholeModelWeight).
  DecisionRecord decide(const std::string& kind, const std::string& node, const std::string& signature,
                        const std::vector<Candidate>& candidates, double weight = 1.0) {
    DecisionRecord d;
    d.kind = kind;
    d.node = node;
    d.signature = kind + "|" + signature;
    for (const auto& c : candidates) d.candidates.push_back(c.name);
    d.choice = d.candidates.front();
    if (auto hit = fromCache(kind, node, signature, d.candidates)) return *hit;
    const auto timed = timeCandidates(candidates, weight);
    if (!timed) return skip(std::move(d), "the --tune-budget is spent");
    const Choice& c = *timed;
    d.rounds = c.rounds;
    d.seconds = c.seconds;
    if (c.baselineFailed) return skip(std::move(d), "the baseline failed: " + c.results[0].error);
    d.choice = c.name;
    // The numbers shown: the winner's, else the best alternative's (why it lost).
    size_t shown = c.index;
    for (size_t i = 1; shown == 0 && i < c.results.size(); ++i)
      if (c.results[i].verdict != CandidateResult::Verdict::Failed) shown = i;
    for (size_t i = shown + 1; c.index == 0 && shown != 0 && i < c.results.size(); ++i)
      if (c.results[i].verdict != CandidateResult::Verdict::Failed && c.results[i].ratio < c.results[shown].ratio)
        shown = i;
    d.challenger = shown == 0 ? "" : c.results[shown].name;  // shown == 0: every alternative failed
    d.ratio = c.results[shown].ratio;
    d.low = c.results[shown].low;
    d.high = c.results[shown].high;
    d.note = c.summary();
    for (size_t i = 1; i < c.results.size(); ++i)
      if (c.results[i].verdict == CandidateResult::Verdict::Failed) d.out.emplace_back(c.results[i].name, c.results[i].error);
    ++result_.measured;
    store(d);
    return record(std::move(d));
  }
  // Keeps a measured decision in the tuning cache under its signature.
  void store(const DecisionRecord& d) {
    CachedDecision cd;
    cd.choice = d.choice;
    cd.candidates = d.candidates;
    cd.ratio = d.ratio, cd.low = d.low, cd.high = d.high, cd.rounds = d.rounds, cd.seconds = d.seconds;
    cd.challenger = d.challenger;
    cache_.store(context_, d.signature, cd);
  }
  // A per-op decision: by the op's signature from the cache, else timed
  // (the candidates, `names` in order, are built only then: their inputs cost
  // memory and time). Whether the rewrite (a candidate other than the first)
  // was chosen; skipped (false) when the op has no signature or candidates.
  using CandidateFactory = std::function<std::optional<std::vector<Candidate>>(std::string& why)>;
  // `context`: what else the timing depends on (appended to the signature).
  bool decideOp(const std::string& kind, const ir::Node& n, const std::vector<std::string>& names,
                const CandidateFactory& make, const std::string& context = "") {
    const std::string node = n.output()->name();
    std::string why;
    auto sig = opSignature(n, why);
    if (!sig) return skipped(kind, node, names.front(), why).rewrites();
    if (!context.empty()) *sig += " " + context;
    if (auto hit = fromCache(kind, node, *sig, names)) return hit->rewrites();
    std::optional<std::vector<Candidate>> candidates;
    try {
      candidates = make(why);
    } catch (const std::exception& e) {
      // Building the alternatives ran a kernel this machine lacks (a bf16
      // oneDNN primitive on a CPU without AVX-512, say): they are out.
      DecisionRecord d;
      d.kind = kind;
      d.node = node;
      d.choice = names.front();
      d.candidates = names;
      for (size_t i = 1; i < names.size(); ++i) d.out.emplace_back(names[i], firstLine(e.what()));
      return skip(std::move(d), "cannot run on this machine: " + firstLine(e.what())).rewrites();
    }
    if (!candidates) return skipped(kind, node, names.front(), why).rewrites();
    return decide(kind, node, *sig, *candidates).rewrites();
  }

  // The cached decision for `signature` when its choice is one of `names`
  // (recorded), else nullopt.
  std::optional<DecisionRecord> fromCache(const std::string& kind, const std::string& node, const std::string& signature,
                                          const std::vector<std::string>& names) {
    auto hit = cache_.lookup(context_, kind + "|" + signature);
    if (!hit || std::find(names.begin(), names.end(), hit->choice) == names.end()) return std::nullopt;
    DecisionRecord d;
    d.kind = kind;
    d.node = node;
    d.signature = kind + "|" + signature;
    d.candidates = hit->candidates.empty() ? names : hit->candidates;
    d.source = DecisionRecord::Source::Cached;
    d.choice = hit->choice;
    d.ratio = hit->ratio, d.low = hit->low, d.high = hit->high, d.rounds = hit->rounds;
    d.challenger = hit->challenger.empty() ? hit->choice : hit->challenger;
    ++result_.cached;
    return record(std::move(d));
  }
  DecisionRecord skip(DecisionRecord d, const std::string& why) {
    d.source = DecisionRecord::Source::Skipped;
    d.note = why;
    ++result_.skipped;
    return record(std::move(d));
  }
  DecisionRecord skipped(const std::string& kind, const std::string& node, const std::string& baseline,
                         const std::string& why) {
    DecisionRecord d;
    d.kind = kind;
    d.node = node;
    d.choice = baseline;
    d.candidates = {baseline};
    return skip(std::move(d), why);
  }
  DecisionRecord record(DecisionRecord d) {
    say(fmt::format("tune [{:>3}] {:5.1f} s  {}", result_.decisions.size() + 1, timer_->elapsedSeconds() - start_,
                    d.line()));
    result_.decisions.push_back(d);
    return d;
  }
  void say(const std::string& line) const {
    if (o_.progress) *o_.progress << line << "\n" << std::flush;
  }

  // ---- the decisions

  void decideBnAffine(const PipelineElement& e) {
    if (option(e, "force", "false") == "true" || !option(e, "nodes", "").empty()) return keep(e);
    std::set<std::string> convert;
    std::vector<ir::Node*> bns;
    work_.forward().walk([&](ir::Node* n) {
      if (n->is("aten::batch_norm") && n->owningBlock() == work_.forward().block()) bns.push_back(n);
    });
    for (ir::Node* n : bns) {
      const bool converted = decideOp("bn-to-affine", *n, {"batch_norm", "addcmul"}, [&](std::string& why) {
        return bnAffineCandidates(*n, o_.device, why);
      });
      if (converted) convert.insert(n->output()->name());
    }
    PipelineElement tuned = e;
    if (!convert.empty()) setOption(tuned, "nodes", joinNameList(convert));
    keep(tuned);
  }

  // channels-last per region (layout::channelsLastRegions, as mode=on finds
  // them; only those named by a given regions=). A region's decision is
  // cached under its signature (tune/signature.h: regionSignature). The
  // regions not in the cache are the variables of whole-model A/Bs, the
  // cached ones fixed at their choice: first the set the given mode
  // converts (mode=auto: the regions its rules accept; the baseline, so that
  // within noise the layout stays as the preset has it) vs all off vs all
  // on; then, with two or more variables, each region in program order on
  // its own, the others as the best set so far: that set (the baseline) vs
  // the set with this region the other way, kept only when it wins beyond
  // noise. One region: one A/B (as the whole-model
  // decision before). A region the budget leaves without its own A/B keeps
  // the first A/B's verdict, uncached. -> channels-last{mode=on,regions=...}
  // or mode=off.
  void decideLayout(const PipelineElement& e) {
    const std::string mode = option(e, "mode", "auto");
    if (mode == "off") return keep(e);
    PipelineElement off = e;
    setOption(off, "mode", "off");
    eraseOption(off, "regions");
    rewriters::PassContext query;
    query.targetDevice = ctx_.targetDevice;
    query.preferBf16 = ctx_.preferBf16;
    std::vector<layout::ChannelsLastRegion> found = layout::channelsLastRegions(work_.forward(), query);
    if (const std::string given = option(e, "regions", ""); !given.empty()) {
      const std::set<std::string> named = parseNameList(given);  // a leading % is dropped
      found.erase(std::remove_if(found.begin(), found.end(), [&](const auto& r) { return !named.count(r.id); }),
                  found.end());
    }
    if (found.empty()) {
      skipped("channels-last", "model", "off", "no conv region to convert");
      return keep(off);
    }

    std::vector<LayoutRegion> regions;
    std::string graphKey;  // for regions whose shapes are unknown: this model and inputs only
    for (const auto& r : found) {
      std::string why;
      auto sig = regionSignature(r.nodes, why);
      std::string key = fmt::format("region {} ({} convs, {} nodes)", digest(sig ? *sig : ""), r.convs.size(),
                                    r.nodes.size());
      if (!sig) {
        if (graphKey.empty()) graphKey = digest(work_.forward().str()) + " inputs " + inputsText();
        key = fmt::format("region {} of graph {} ({} convs)", r.id, graphKey, r.convs.size());
      }
      regions.push_back({&r, key, std::nullopt});
    }
    std::set<std::string> fixedOn;
    std::vector<size_t> free;
    for (size_t i = 0; i < regions.size(); ++i) {
      if (auto hit = fromCache("channels-last", regions[i].r->id, regions[i].signature, {"off", "on"})) {
        regions[i].on = hit->choice == "on";
        if (*regions[i].on) fixedOn.insert(regions[i].r->id);
      } else {
        free.push_back(i);
      }
    }
    if (!free.empty()) measureRegions(e, regions, free, fixedOn);
    std::set<std::string> on;
    for (const LayoutRegion& r : regions)
      if (r.on.value_or(false)) on.insert(r.r->id);
    if (on.empty()) return keep(off);
    PipelineElement tuned = e;
    setOption(tuned, "mode", "on");
    setOption(tuned, "regions", joinNameList(on));
    keep(tuned);
  }

  struct LayoutRegion {
    const layout::ChannelsLastRegion* r;
    std::string signature;   // the cache key, without the kind
    std::optional<bool> on;  // decided (cached or measured)
  };

  void measureRegions(const PipelineElement& e, std::vector<LayoutRegion>& regions, const std::vector<size_t>& free,
                      const std::set<std::string>& fixedOn) {
    auto skipAll = [&](const std::string& why) {
      for (size_t i : free) {
        DecisionRecord d;
        d.kind = "channels-last";
        d.node = regions[i].r->id;
        d.signature = "channels-last|" + regions[i].signature;
        d.candidates = {"off", "on"};
        d.choice = "off";
        regions[i].on = false;
        skip(std::move(d), why);
      }
    };
    if (remaining() <= 0) {
      result_.budgetSpent = true;
      return skipAll("the --tune-budget is spent");
    }
    if (free.size() > 1) expected_ += free.size();  // one toggle A/B per region after the first
    std::string listing;
    for (size_t i : free)
      listing += (listing.empty() ? "" : ", ") +
                 layout::regionLabel(regions[i].r->id, regions[i].r->convs.size(),
                                     regions[i].r->convs.empty() ? nullptr : regions[i].r->convs.front());
    say(fmt::format("tune        {:5.1f} s  channels-last: {} region{} to measure ({}){}", timer_->elapsedSeconds() - start_,
                    free.size(), free.size() == 1 ? "" : "s", listing,
                    fixedOn.empty() ? "" : fmt::format(", {} on from the cache", fixedOn.size())));
    // Whole-model candidates, one per distinct graph.
    std::map<std::string, std::string> builtText;  // set name -> graph text
    auto variant = [&](const std::set<std::string>& on) {
      PipelineElement v = e;
      if (on.empty()) {
        setOption(v, "mode", "off");
        eraseOption(v, "regions");
      } else {
        setOption(v, "mode", "on");
        setOption(v, "regions", joinNameList(on));
      }
      ir::Model copy = work_.clone();
      runOn(copy, v);
      return copy;
    };
    // Times the sets (the first is the baseline); nullopt when it could not.
    bool same = false;  // measure() found one distinct graph only
    auto measure = [&](const std::vector<std::set<std::string>>& sets, std::vector<std::set<std::string>>& kept,
                       std::string& why) -> std::optional<Choice> {
      same = false;
      std::vector<std::pair<std::string, ir::Model>> models;
      std::set<std::string> seen;
      kept.clear();
      for (const auto& set : sets) {
        ir::Model m = variant(set);
        if (!seen.insert(m.forward().str()).second) continue;
        models.emplace_back(regionSetName(set), std::move(m));
        kept.push_back(set);
      }
      if (models.size() < 2) {
        same = true;
        why = "converting it gives the same graph";
        return std::nullopt;
      }
      std::vector<std::pair<std::string, const ir::Model*>> ptrs;
      for (const auto& [name, m] : models) ptrs.emplace_back(name, &m);
      std::vector<Candidate> candidates;
      try {
        candidates = wholeModelCandidates(ptrs, *ctx_.exampleInputs, o_.device);
      } catch (const std::exception& ex) {
        why = std::string("cannot export the variants: ") + ex.what();
        return std::nullopt;
      }
      auto c = timeCandidates(candidates, kWholeModelWeight);
      if (!c) why = "the --tune-budget is spent";
      else if (c->baselineFailed) why = "the baseline failed: " + c->results[0].error;
      if (!c || c->baselineFailed) return std::nullopt;
      return c;
    };
    // A region's decision from an A/B whose baseline (candidate 0) has it
    // `baselineOn` and whose candidate `otherIndex` has it the other way
    // (0: none has; the first A/B, out of budget, decided it with the others).
    auto recordRegion = [&](size_t i, const Choice& c, size_t otherIndex, bool baselineOn, bool on, bool cache,
                            const std::string& how) {
      LayoutRegion& reg = regions[i];
      reg.on = on;
      DecisionRecord d;
      d.kind = "channels-last";
      d.node = reg.r->id;
      d.signature = "channels-last|" + reg.signature;
      d.candidates = baselineOn ? std::vector<std::string>{"on", "off"} : std::vector<std::string>{"off", "on"};
      d.choice = on ? "on" : "off";
      const CandidateResult& other = c.results[otherIndex];
      if (otherIndex != 0 && other.verdict != CandidateResult::Verdict::Failed) {  // failed: no ratio to show
        d.challenger = d.candidates[1];
        d.ratio = other.ratio, d.low = other.low, d.high = other.high;
      }
      d.rounds = c.rounds;
      d.seconds = c.seconds;
      d.note = fmt::format("{} convs; {}: {}", reg.r->convs.size(), how, c.summary());
      ++result_.measured;
      if (cache) store(d);
      record(std::move(d));
    };

    // 1. What the preset's mode converts (mode=auto: the regions its rules
    // accept; mode=on: all), the baseline, so that within noise the layout
    // stays as the preset has it, vs all off vs all on.
    std::set<std::string> autoSet = fixedOn, allOn = fixedOn;
    for (size_t i : free) {
      allOn.insert(regions[i].r->id);
      if (regions[i].r->autoDecline.empty()) autoSet.insert(regions[i].r->id);
    }
    const std::set<std::string>& presetSet = option(e, "mode", "auto") == "on" ? allOn : autoSet;
    std::vector<std::set<std::string>> kept;
    std::string why;
    const auto first = measure({presetSet, fixedOn, allOn}, kept, why);
    if (!first) return skipAll(why);
    say(fmt::format("tune        {:5.1f} s  channels-last, {} (mode={}) vs the others of all off, all on: {}",
                    timer_->elapsedSeconds() - start_, regionSetName(kept[0]), option(e, "mode", "auto"),
                    first->summary()));
    // The first candidate of `sets` with region `id` the other way than the
    // baseline's, else 0.
    auto otherWay = [&](const std::vector<std::set<std::string>>& sets, const std::string& id) -> size_t {
      for (size_t j = 1; j < sets.size(); ++j)
        if (sets[j].count(id) != sets[0].count(id)) return j;
      return 0;
    };
    std::set<std::string> current = kept[first->index];
    if (free.size() == 1) {
      const std::string& id = regions[free.front()].r->id;
      return recordRegion(free.front(), *first, otherWay(kept, id), kept[0].count(id) > 0, current.count(id) > 0,
                          true, "off vs on");
    }
    // 2. Each region on its own, the others as the best so far: that set
    // (the baseline: within noise it stays) vs the set with this region
    // the other way.
    for (size_t k = 0; k < free.size(); ++k) {
      const size_t i = free[k];
      const std::string& id = regions[i].r->id;
      const bool isOn = current.count(id) > 0;
      std::set<std::string> toggled = current;
      if (isOn) toggled.erase(id);
      else toggled.insert(id);
      std::vector<std::set<std::string>> pair;
      const auto c = measure({current, toggled}, pair, why);
      if (!c && same) {  // converting it changes nothing
        DecisionRecord d;
        d.kind = "channels-last";
        d.node = id;
        d.signature = "channels-last|" + regions[i].signature;
        d.candidates = {"off", "on"};
        d.choice = "off";
        regions[i].on = false;
        current.erase(id);
        skip(std::move(d), why);
        continue;
      }
      if (!c) {
        // Decided with the others by the first A/B; not cached, so that a
        // later run with budget measures it alone.
        for (size_t rest = k; rest < free.size(); ++rest) {
          const std::string& other = regions[free[rest]].r->id;
          recordRegion(free[rest], *first, otherWay(kept, other), kept[0].count(other) > 0, current.count(other) > 0,
                       false, "kept as the first A/B left it (" + why + ")");
        }
        return;
      }
      const std::string how = fmt::format("{} vs {}", regionSetName(current), regionSetName(toggled));
      if (c->index == 1) current = toggled;
      recordRegion(i, *c, 1, isOn, current.count(id) > 0, true, how);
    }
  }

  void decidePrecision(const PipelineElement& e) {
    const std::string dtypeOpt = option(e, "dtype", "auto");
    const bool emulate = option(e, "emulate", "false") == "true";
    const c10::ScalarType low =
        quant::resolveCastDtype(dtypeOpt, ctx_.targetDevice, option(e, "prefer-bf16", "false") == "true" || ctx_.preferBf16);
    if (emulate || (low == c10::ScalarType::Half && !o_.device.is_cuda()) || !option(e, "keep-fp32", "").empty()) {
      skipped("precision", "model", "as given",
              emulate ? "emulate=true: nothing to time" : "fp16 cannot run on this CPU: kept as given");
      return keep(e);
    }
    const quant::PrecisionPolicy policy = quant::castPolicy(low, ctx_.targetDevice, emulate);
    std::vector<ir::Node*> ops;
    std::set<std::string> keepFp32;
    work_.forward().walk([&](ir::Node* n) {
      if (n->numOutputs() == 0 || policy.classify(*n) != quant::OpPrecision::LowPrecision) return;
      // Only top-level single-result ops are measured; the others stay fp32.
      if (n->owningBlock() == work_.forward().block() && n->numOutputs() == 1) ops.push_back(n);
      else keepFp32.insert(n->output(0)->name());
    });
    size_t lowered = 0;
    for (ir::Node* n : ops) {
      const std::string name = n->output()->name();
      const PrecisionNeighbours where = neighbours(*n, policy);
      const bool lower = decideOp(
          "precision", *n, {"fp32", ir::dtypeName(low)},
          [&](std::string& why) { return convPrecisionCandidates(*n, low, where, o_.device, why); }, where.text());
      if (lower) ++lowered;
      else keepFp32.insert(name);
    }
    std::optional<PipelineElement> tuned;  // none: no op measured faster, the cast is dropped
    if (lowered > 0) {
      tuned = e;
      setOption(*tuned, "dtype", low == c10::ScalarType::Half ? "fp16" : "bf16");
      setOption(*tuned, "min-channels", "0");
      if (!keepFp32.empty()) setOption(*tuned, "keep-fp32", joinNameList(keepFp32));
    }
    if (!preferOpByOp("precision", e, tuned)) return keep(e);
    if (tuned) return keep(*tuned);
    say(fmt::format("tune: no op measured faster in {}: cast is dropped, the model stays fp32", ir::dtypeName(low)));
  }

  // The op's neighbours in the preset's assignment, where every op the
  // policy lowers runs in low precision and ops that follow or promote their
  // inputs (relu, pooling, add) take the precision those arrive in.
  static PrecisionNeighbours neighbours(const ir::Node& op, const quant::PrecisionPolicy& policy) {
    PrecisionNeighbours out;
    for (size_t i = 0; i < op.numArgs(); ++i)
      if (const ir::Value* v = op.arg(i).value(); v && v->isTensor() && arrivesLow(v, policy, 0)) out.lowInputs.insert(i);
    out.lowOutput = readInLow(op.output(), policy, 0);
    return out;
  }
  static bool passesPrecisionOn(quant::OpPrecision p) {
    return p == quant::OpPrecision::Follow || p == quant::OpPrecision::Promote;
  }
  static bool arrivesLow(const ir::Value* v, const quant::PrecisionPolicy& policy, int depth) {
    const ir::Node* n = v->node();
    if (!n || !n->isCall() || depth > 16) return false;  // graph inputs and constants' reads are float32
    const quant::OpPrecision p = policy.classify(*n);
    if (p == quant::OpPrecision::LowPrecision) return true;
    if (!passesPrecisionOn(p)) return false;
    for (size_t i = 0; i < n->numArgs(); ++i)
      if (const ir::Value* in = n->arg(i).value(); in && in->isTensor() && arrivesLow(in, policy, depth + 1)) return true;
    return false;
  }
  static bool readInLow(const ir::Value* v, const quant::PrecisionPolicy& policy, int depth) {
    if (v->uses().empty() || depth > 16) return false;
    for (const ir::Use& u : v->uses()) {
      const ir::Node* user = u.user;
      if (!user->isCall() || !user->blocks().empty()) return false;  // graph outputs stay float32
      const quant::OpPrecision p = policy.classify(*user);
      if (p == quant::OpPrecision::LowPrecision || p == quant::OpPrecision::Neutral) continue;
      if (!passesPrecisionOn(p) || user->numOutputs() != 1 || !readInLow(user->output(), policy, depth + 1)) return false;
    }
    return true;
  }

  // Ops timed one at a time, each with its own inputs, do not add up to the
  // model: a cast between two ops that both run in low precision is not
  // there, layouts and caches carry over from op to op. So an op-by-op
  // assignment is checked as a whole against the preset's (`preset`, none:
  // the element is absent) and kept only when the whole model runs faster
  // beyond noise; the preset's is the baseline. Whether to keep `opByOp`
  // (`challenger`: its candidate's name, "op-by-op" unless a second check
  // of a subset needs its own).
  bool preferOpByOp(const std::string& kind, const std::optional<PipelineElement>& preset,
                    const std::optional<PipelineElement>& opByOp, const std::string& challenger = "op-by-op") {
    auto text = [](const std::optional<PipelineElement>& e) {
      return e ? rewriters::printPipeline(Pipeline{{*e}}) : std::string("(none)");
    };
    ir::Model presetModel = work_.clone();
    if (preset) runOn(presetModel, *preset);
    ir::Model tunedModel = work_.clone();
    if (opByOp) runOn(tunedModel, *opByOp);
    if (presetModel.forward().str() == tunedModel.forward().str()) return true;
    const std::string sig = digest(work_.forward().str() + "|" + text(preset) + "|" + text(opByOp)) + " inputs " + inputsText();
    const std::vector<std::string> names{"preset", challenger};
    if (auto hit = fromCache(kind, "model", sig, names)) return hit->rewrites();
    std::vector<std::pair<std::string, const ir::Model*>> models{{names[0], &presetModel}, {names[1], &tunedModel}};
    std::vector<Candidate> candidates;
    try {
      candidates = wholeModelCandidates(models, *ctx_.exampleInputs, o_.device);
    } catch (const std::exception& ex) {
      skipped(kind, "model", "preset", std::string("cannot export the variants: ") + ex.what());
      return false;
    }
    return decide(kind, "model", sig, candidates, kWholeModelWeight).rewrites();
  }

  void decideKernels() {
    if (!ir::findSchema("aten::mkldnn_convolution", "")) return;
    std::set<std::string> mkldnn;
    std::vector<ir::Node*> convs;
    work_.forward().walk([&](ir::Node* n) {
      if (n->is("aten::conv2d") && n->owningBlock() == work_.forward().block()) convs.push_back(n);
    });
    for (ir::Node* n : convs) {
      if (std::string why = mkldnnIneligible(*n); !why.empty()) {
        skipped("conv-kernel", n->output()->name(), "conv2d", why);
        continue;
      }
      const bool oneDnn = decideOp("conv-kernel", *n, {"conv2d", "mkldnn"}, [&](std::string& why) {
        return convKernelCandidates(*n, o_.device, why);
      });
      if (oneDnn) mkldnn.insert(n->output()->name());
    }
    if (mkldnn.empty()) return;
    PipelineElement e;
    e.name = "tuned-kernels";
    e.options.emplace_back("mkldnn", joinNameList(mkldnn));
    if (preferOpByOp("conv-kernel", std::nullopt, e)) keep(e);
  }

  // onednn-blocked (CPU targets): the whole model with its conv regions on
  // oneDNN tensors and their weights packed when it loads, against the model
  // as tuned so far (A/B); kept, before the closing fuse-cudnn, when it wins
  // beyond noise. Given in the pipeline, it is kept as given.
  void decideBlocked() {
    if (!registry_.find("onednn-blocked")) return;
    if (std::any_of(out_.elements.begin(), out_.elements.end(),
                    [](const PipelineElement& e) { return e.name == "onednn-blocked"; }))
      return;
    PipelineElement e;
    e.name = "onednn-blocked";
    ir::Model blocked = work_.clone();
    try {
      runOn(blocked, e);
    } catch (const std::exception& ex) {
      skipped("onednn-blocked", "model", "dense", std::string("the pass failed: ") + ex.what());
      return;
    }
    if (blocked.forward().str() == work_.forward().str()) {
      skipped("onednn-blocked", "model", "dense", "no conv region to convert (--explain says why)");
      return;
    }
    std::vector<std::pair<std::string, const ir::Model*>> models{{"dense", &work_}, {"blocked", &blocked}};
    const std::string sig = digest(work_.forward().str()) + " inputs " + inputsText();
    std::vector<Candidate> candidates;
    try {
      candidates = wholeModelCandidates(models, *ctx_.exampleInputs, o_.device);
    } catch (const std::exception& ex) {
      skipped("onednn-blocked", "model", "dense", std::string("cannot export the variants: ") + ex.what());
      return;
    }
    if (decide("onednn-blocked", "model", sig, candidates, kWholeModelWeight).rewrites()) keep(e);
  }

  // Prepacked convs (CPU targets): each conv still on dense tensors with a
  // constant weight (onednn-blocked, when kept, took those in its regions),
  // as it is vs with its weight packed when the model loads
  // (micro-benchmark, cached by op signature); the convs that win, as a
  // whole-model A/B, -> a tuned-kernels{prepacked=...} element after
  // onednn-blocked.
  // Convs and linears with constant weights, on dense tensors (those in
  // onednn-blocked regions read reordered weights and are left alone), each
  // timed as it is vs prepacked; the winners are then checked together as a
  // whole model, and the linears alone when the whole set does not win.
  void decidePrepacked() {
    if (!hasPrepackedConvs()) return;
    std::vector<ir::Node*> ops;
    work_.forward().walk([&](ir::Node* n) {
      if ((n->is("aten::conv2d") || n->is("aten::mkldnn_convolution") || n->is("aten::linear")) &&
          n->owningBlock() == work_.forward().block() && ir::OpView::of(n).value("weight") &&
          rewriters::constantTensor(ir::OpView::of(n).value("weight")))
        ops.push_back(n);
    });
    std::set<std::string> convs, linears;
    for (ir::Node* n : ops) {
      const bool linear = n->is("aten::linear");
      const std::string kind = linear ? "linear-prepack" : "conv-prepack";
      if (std::string why = linear ? linearPrepackIneligible(*n) : prepackIneligible(*n); !why.empty()) {
        skipped(kind, n->output()->name(), "dense", why);
        continue;
      }
      const bool pack = decideOp(kind, *n, {"dense", "prepacked"}, [&](std::string& why) {
        return linear ? linearPrepackCandidates(*n, o_.device, why) : convPrepackCandidates(*n, o_.device, why);
      });
      if (pack) (linear ? linears : convs).insert(n->output()->name());
    }
    auto element = [](const std::set<std::string>& names) {
      PipelineElement e;
      e.name = "tuned-kernels";
      e.options.emplace_back("prepacked", joinNameList(names));
      return e;
    };
    std::set<std::string> all = convs;
    all.insert(linears.begin(), linears.end());
    if (all.empty()) return;
    if (preferOpByOp("conv-prepack", std::nullopt, element(all))) return keep(element(all));
    if (!convs.empty() && !linears.empty() &&
        preferOpByOp("linear-prepack", std::nullopt, element(linears), "op-by-op linears"))
      keep(element(linears));
  }

  void decideCudnn(const PipelineElement& e) {
    if (ctx_.targetDevice != "cuda" || !o_.device.is_cuda()) return keep(e);  // it declines itself
    ir::Model fused = work_.clone();
    runOn(fused, e);
    if (fused.forward().str() == work_.forward().str()) return keep(e);
    std::vector<std::pair<std::string, const ir::Model*>> models{{"unfused", &work_}, {"fused", &fused}};
    const std::string sig = digest(work_.forward().str()) + " inputs " + inputsText();
    std::vector<Candidate> candidates = wholeModelCandidates(models, *ctx_.exampleInputs, o_.device);
    if (decide("fuse-cudnn", "model", sig, candidates, kWholeModelWeight).rewrites()) keep(e);
    else say("tune: fuse-cudnn is dropped: cuDNN's fused kernels measured no faster here");
  }

  std::string inputsText() const {
    std::string s;
    for (const c10::IValue& v : *ctx_.exampleInputs) {
      if (!s.empty()) s += ",";
      if (v.isTensor()) s += fmt::format("{}[{}]", ir::dtypeName(v.toTensor().scalar_type()), fmt::join(v.toTensor().sizes().vec(), "x"));
      else s += v.tagKind();
    }
    return s;
  }

  const rewriters::PassRegistry& registry_;
  const TuneOptions& o_;
  ir::Model work_;
  rewriters::PassContext ctx_;
  std::unique_ptr<Timer> ownTimer_;
  Timer* timer_ = nullptr;
  double start_ = 0;
  size_t expected_ = 1;
  CacheContext context_;
  TuningCache cache_;
  Pipeline out_;
  TuneResult result_;
};

}  // namespace

TuneResult tunePipeline(const ir::Model& model, const rewriters::Pipeline& pipeline,
                        const rewriters::PassRegistry& registry, const rewriters::PassContext& base,
                        const TuneOptions& options) {
  return PipelineTuning(model, registry, base, options).run(pipeline);
}

}  // namespace ptopt::tune
