// channels-last under --tune (tune/tunable.h), per region
// (layout::channelsLastRegions: the regions mode=on finds, or those a given
// regions= names). A region's decision is cached under its signature
// (tune/signature.h: regionSignature). The regions not in the cache are the
// variables of whole-model A/Bs (the distinct graphs only), the cached ones
// fixed at their choice: first the set the given mode converts (mode=auto:
// the regions its rules accept; the baseline, so that within noise the
// layout stays as the preset has it) vs all off vs all on; then, with two or
// more variables, each region in program order on its own, the others as the
// best set so far: that set (the baseline) vs the set with this region the
// other way, kept only when it wins beyond noise. One region: one A/B. A
// region the budget leaves without its own A/B keeps the first A/B's
// verdict, uncached. -> channels-last{mode=on,regions=...} or mode=off; an
// element with mode=off stays off.
#pragma once

#include "tune/tunable.h"

namespace ptopt::layout {

tune::Tunable channelsLastTunable();

}  // namespace ptopt::layout
