#include "layout/onednn_blocked_tuning.h"

#include <algorithm>

namespace ptopt::layout {

namespace {

constexpr const char* kPass = "onednn-blocked";

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
  if (s.compareModels(kPass, s.modelSignature(), {{"dense", &s.model()}, {"blocked", &*blocked}}).rewrites())
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
  t.after = {"conv-kernel"};
  t.offer = offerOneDnnBlocked;
  return t;
}

}  // namespace ptopt::layout
