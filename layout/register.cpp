// The table of layout passes (one line each).
#include "layout/register.h"

#include "layout/channels_last.h"
#include "layout/channels_last_tuning.h"
#include "layout/onednn_blocked.h"
#include "layout/onednn_blocked_tuning.h"

namespace ptopt::layout {

void registerLayoutPasses(rewriters::PassRegistry& registry) {
  registry.add([] { return std::make_unique<ChannelsLastPass>(); });
  registry.add([] { return std::make_unique<OneDnnBlockedPass>(); });
  registry.addRaiseStep({"onednn-blocked", raiseBlockedRegions});
  tune::addTunable(registry, channelsLastTunable());
  tune::addTunable(registry, oneDnnBlockedTunable());
  tune::addTunable(registry, blockedNetworkTunable());
}

}  // namespace ptopt::layout
