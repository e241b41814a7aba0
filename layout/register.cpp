// The table of layout passes (one line each).
#include "layout/register.h"

#include "layout/channels_last.h"

namespace ptopt::layout {

void registerLayoutPasses(rewriters::PassRegistry& registry) {
  registry.add([] { return std::make_unique<ChannelsLastPass>(); });
}

}  // namespace ptopt::layout
