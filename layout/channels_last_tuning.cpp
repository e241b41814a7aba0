#include "layout/channels_last_tuning.h"

#include "layout/channels_last.h"
#include "rewriters/name_list.h"
#include "tune/signature.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace ptopt::layout {

namespace {

// The name of a set of channels-last regions as a candidate: "off" or
// "regions=a;b" (the option it becomes).
std::string regionSetName(const std::set<std::string>& on) {
  return on.empty() ? "off" : "regions=" + rewriters::joinNameList(on);
}

struct LayoutRegion {
  const ChannelsLastRegion* r;
  std::string signature;   // the cache key, without the kind
  std::optional<bool> on;  // decided (cached or measured)
};

void measureRegions(tune::TuningSession& s, const rewriters::PipelineElement& e, std::vector<LayoutRegion>& regions, const std::vector<size_t>& free,
                    const std::set<std::string>& fixedOn) {
  auto skipAll = [&](const std::string& why) {
    for (size_t i : free) {
      tune::DecisionRecord d;
      d.kind = "channels-last";
      d.node = regions[i].r->id;
      d.signature = "channels-last|" + regions[i].signature;
      d.candidates = {"off", "on"};
      d.choice = "off";
      regions[i].on = false;
      s.skip(std::move(d), why);
    }
  };
  if (!s.budgetLeft()) return skipAll("the --tune-budget is spent");
  if (free.size() > 1) s.expectMoreDecisions(free.size());  // one toggle A/B per region after the first
  std::string listing;
  for (size_t i : free)
    listing += (listing.empty() ? "" : ", ") +
               regionLabel(regions[i].r->id, regions[i].r->convs.size(),
                                   regions[i].r->convs.empty() ? nullptr : regions[i].r->convs.front());
  s.say(fmt::format("tune        {:5.1f} s  channels-last: {} region{} to measure ({}){}", s.elapsedSeconds(),
                  free.size(), free.size() == 1 ? "" : "s", listing,
                  fixedOn.empty() ? "" : fmt::format(", {} on from the cache", fixedOn.size())));
  // Whole-model candidates, one per distinct graph.
  auto variant = [&](const std::set<std::string>& on) {
    rewriters::PipelineElement v = e;
    if (on.empty()) {
      v.setOption("mode", "off");
      v.eraseOption("regions");
    } else {
      v.setOption("mode", "on");
      v.setOption("regions", rewriters::joinNameList(on));
    }
    return s.variant(v);
  };
  // Times the sets (the first is the baseline); nullopt when it could not.
  bool same = false;  // measure() found one distinct graph only
  auto measure = [&](const std::vector<std::set<std::string>>& sets, std::vector<std::set<std::string>>& kept,
                     std::string& why) -> std::optional<tune::Choice> {
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
    tune::ModelVariants ptrs;
    for (const auto& [name, m] : models) ptrs.emplace_back(name, &m);
    return s.timeModels(ptrs, why);
  };
  // A region's decision from an A/B whose baseline (candidate 0) has it
  // `baselineOn` and whose candidate `otherIndex` has it the other way
  // (0: none has; the first A/B, out of budget, decided it with the others).
  auto recordRegion = [&](size_t i, const tune::Choice& c, size_t otherIndex, bool baselineOn, bool on, bool cache,
                          const std::string& how) {
    LayoutRegion& reg = regions[i];
    reg.on = on;
    tune::DecisionRecord d;
    d.kind = "channels-last";
    d.node = reg.r->id;
    d.signature = "channels-last|" + reg.signature;
    d.candidates = baselineOn ? std::vector<std::string>{"on", "off"} : std::vector<std::string>{"off", "on"};
    d.choice = on ? "on" : "off";
    const tune::CandidateResult& other = c.results[otherIndex];
    if (otherIndex != 0 && other.verdict != tune::CandidateResult::Verdict::Failed) {  // failed: no ratio to show
      d.challenger = d.candidates[1];
      d.ratio = other.ratio, d.low = other.low, d.high = other.high;
    }
    d.rounds = c.rounds;
    d.seconds = c.seconds;
    d.note = fmt::format("{} convs; {}: {}", reg.r->convs.size(), how, c.summary());
    s.recordMeasured(std::move(d), cache);
  };

  // 1. What the preset's mode converts (mode=auto: the regions its rules
  // accept; mode=on: all), the baseline, so that within noise the layout
  // stays as the preset has it, vs all off vs all on.
  std::set<std::string> autoSet = fixedOn, allOn = fixedOn;
  for (size_t i : free) {
    allOn.insert(regions[i].r->id);
    if (regions[i].r->autoDecline.empty()) autoSet.insert(regions[i].r->id);
  }
  const std::set<std::string>& presetSet = e.stringOption("mode") == "on" ? allOn : autoSet;
  std::vector<std::set<std::string>> kept;
  std::string why;
  const auto first = measure({presetSet, fixedOn, allOn}, kept, why);
  if (!first) return skipAll(why);
  s.say(fmt::format("tune        {:5.1f} s  channels-last, {} (mode={}) vs the others of all off, all on: {}",
                  s.elapsedSeconds(), regionSetName(kept[0]), e.stringOption("mode"),
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
      tune::DecisionRecord d;
      d.kind = "channels-last";
      d.node = id;
      d.signature = "channels-last|" + regions[i].signature;
      d.candidates = {"off", "on"};
      d.choice = "off";
      regions[i].on = false;
      current.erase(id);
      s.skip(std::move(d), why);
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

void tuneChannelsLast(tune::TuningSession& s, const rewriters::PipelineElement& e) {
  const std::string mode = e.stringOption("mode");
  if (mode == "off") return s.keep(e);
  rewriters::PipelineElement off = e;
  off.setOption("mode", "off");
  off.eraseOption("regions");
  rewriters::PassContext query;
  query.targetDevice = s.context().targetDevice;
  query.preferBf16 = s.context().preferBf16;
  query.assumedIsa = s.context().assumedIsa;
  std::vector<ChannelsLastRegion> found = channelsLastRegions(s.model().forward(), query);
  if (const std::string given = e.stringOption("regions"); !given.empty()) {
    const std::set<std::string> named = rewriters::parseNameList(given);  // a leading % is dropped
    found.erase(std::remove_if(found.begin(), found.end(), [&](const auto& r) { return !named.count(r.id); }),
                found.end());
  }
  if (found.empty()) {
    s.skipped("channels-last", "model", "off", "no conv region to convert");
    return s.keep(off);
  }

  std::vector<LayoutRegion> regions;
  std::string graphKey;  // for regions whose shapes are unknown: this model and inputs only
  for (const auto& r : found) {
    std::string why;
    auto sig = tune::regionSignature(r.nodes, why);
    std::string key = fmt::format("region {} ({} convs, {} nodes)", tune::digest(sig ? *sig : ""), r.convs.size(),
                                  r.nodes.size());
    if (!sig) {
      if (graphKey.empty()) graphKey = s.modelSignature();
      key = fmt::format("region {} of graph {} ({} convs)", r.id, graphKey, r.convs.size());
    }
    regions.push_back({&r, key, std::nullopt});
  }
  std::set<std::string> fixedOn;
  std::vector<size_t> free;
  for (size_t i = 0; i < regions.size(); ++i) {
    if (auto hit = s.fromCache("channels-last", regions[i].r->id, regions[i].signature, {"off", "on"})) {
      regions[i].on = hit->choice == "on";
      if (*regions[i].on) fixedOn.insert(regions[i].r->id);
    } else {
      free.push_back(i);
    }
  }
  if (!free.empty()) measureRegions(s, e, regions, free, fixedOn);
  std::set<std::string> on;
  for (const LayoutRegion& r : regions)
    if (r.on.value_or(false)) on.insert(r.r->id);
  if (on.empty()) return s.keep(off);
  rewriters::PipelineElement tuned = e;
  tuned.setOption("mode", "on");
  tuned.setOption("regions", rewriters::joinNameList(on));
  s.keep(tuned);
}

}  // namespace

tune::Tunable channelsLastTunable() {
  return tune::elementTunable("channels-last", "channels-last", tuneChannelsLast, tune::Listing::Every);
}

}  // namespace ptopt::layout
