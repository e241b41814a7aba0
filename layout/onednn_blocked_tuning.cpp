#include "layout/onednn_blocked_tuning.h"

#include "layout/onednn_blocked.h"
#include "rewriters/name_list.h"

#include <algorithm>
#include <set>

namespace ptopt::layout {

namespace {

constexpr const char* kPass = "onednn-blocked";

// Regions toggled one at a time after the all-or-nothing A/B, most convs
// first; the others follow that A/B.
constexpr size_t kMaxToggledRegions = 8;

void offerOneDnnBlocked(tune::TuningSession& s) {
  const auto& kept = s.tunedSoFar().elements;
  if (std::any_of(kept.begin(), kept.end(), [](const rewriters::PipelineElement& e) { return e.name == kPass; }))
    return;
  rewriters::PipelineElement e;
  e.name = kPass;
  std::optional<ir::Model> blocked;
  try {
    blocked = s.variant(e);
  } catch (const std::exception& ex) {
    s.skipped(kPass, "model", "dense", std::string("the pass failed: ") + ex.what());
    return;
  }
  if (blocked->forward().str() == s.model().forward().str()) {
    s.skipped(kPass, "model", "dense", "no conv region to convert (--explain says why)");
    return;
  }
  const bool allWin =
      s.compareModels(kPass, s.modelSignature(), {{"dense", &s.model()}, {"blocked", &*blocked}}).rewrites();
  std::vector<BlockedRegion> regions = oneDnnBlockedRegions(s.model().forward(), 2);
  std::set<std::string> on;
  if (allWin)
    for (const BlockedRegion& r : regions) on.insert(r.id);
  // 2. Each region in turn: the best set so far vs that set with the region
  // the other way (the baseline stays within noise).
  if (regions.size() > 1) {
    std::stable_sort(regions.begin(), regions.end(),
                     [](const BlockedRegion& a, const BlockedRegion& b) { return a.convs > b.convs; });
    if (regions.size() > kMaxToggledRegions) regions.resize(kMaxToggledRegions);
    s.expectMoreDecisions(regions.size());
    auto withRegions = [&](const std::set<std::string>& set) {
      rewriters::PipelineElement v = e;
      v.setOption("regions", rewriters::joinNameList(set));
      return set.empty() ? s.model().clone() : s.variant(v);
    };
    for (const BlockedRegion& r : regions) {
      if (!s.budgetLeft()) break;
      std::set<std::string> toggled = on;
      if (!toggled.erase(r.id)) toggled.insert(r.id);
      const ir::Model current = withRegions(on), other = withRegions(toggled);
      const std::string challenger = (on.count(r.id) ? "without %" : "with %") + r.id;
      const auto d = s.compareModels(
          kPass, s.modelSignature("|regions=" + rewriters::joinNameList(on) + "|toggle " + r.id),
          {{on.empty() ? "dense" : "blocked", &current}, {challenger, &other}});
      if (d.rewrites()) on = std::move(toggled);
    }
  }
  if (on.empty()) return;
  std::set<std::string> all;
  for (const BlockedRegion& r : oneDnnBlockedRegions(s.model().forward(), 2)) all.insert(r.id);
  if (on != all) e.setOption("regions", rewriters::joinNameList(on));
  s.keep(e);
}

}  // namespace

tune::Tunable blockedNetworkTunable() {
  tune::Tunable t;
  t.kind = "blocked-network";
  t.applies = [](tune::TuningSession& s) {
    return s.context().targetDevice == "cpu" && s.pipelineUses("shape-prop") && s.pipelineUses("cast");
  };
  t.alternatives = [](tune::TuningSession&, const rewriters::Pipeline& given) {
    rewriters::Pipeline p = given;
    rewriters::dropPass(p, "cast");
    rewriters::dropPass(p, kPass);
    rewriters::addExtraPasses(p, {rewriters::PipelineElement{kPass, {}, {}}});
    return std::vector<std::pair<std::string, rewriters::Pipeline>>{{"blocked-network-fp32", p}};
  };
  t.expectedDecisions = [](const ir::Graph&) { return size_t{1}; };
  return t;
}

tune::Tunable oneDnnBlockedTunable() {
  tune::Tunable t;
  t.kind = kPass;
  t.applies = [](tune::TuningSession& s) {
    return s.context().targetDevice == "cpu" && s.pipelineUses("shape-prop");
  };
  t.offeredBefore = {"fuse-cudnn", "tuned-kernels"};
  t.settles = {tune::TuningAspect::ConvLayout};
  // Regions of convs on the kernels already chosen.
  t.buildsOn = {tune::TuningAspect::ConvKernels};
  t.offer = offerOneDnnBlocked;
  return t;
}

}  // namespace ptopt::layout
