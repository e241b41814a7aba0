// onednn-blocked under --tune (tune/tunable.h), offered on CPU targets with
// shape-prop in the pipeline, after the conv kernels (conv-kernel) and
// before the closing fuse-cudnn or tuned-kernels: the whole model with its
// conv regions on oneDNN tensors and their weights packed when it loads
// (layout/onednn_blocked.h) vs the model as tuned so far (A/B, cached by a
// digest of the graph and the input shapes); then, with two or more regions,
// each region in turn (most convs first, up to 8; the others as that A/B
// left them): the best set so far vs the set with this region the other
// way, kept only when it wins beyond noise -> onednn-blocked (all regions)
// or onednn-blocked{regions=...}, else none. Given in the pipeline before this
// point, it is kept as given.
// And, where the pipeline casts (-O3), the whole network it proposes instead
// of the tuned pipeline (Tunable::alternatives, kind blocked-network): the
// pipeline given to --tune without its cast, onednn-blocked where extra passes
// go, as optimize_for_inference runs a network (fp32, oneDNN tensors, weights
// packed): the precision decision comes first and is per op, so it cannot
// find an fp32 network that beats bf16 ops; one whole-model A/B against the
// tuned model, which stays within noise.
#pragma once

#include "tune/tunable.h"

namespace ptopt::layout {

tune::Tunable oneDnnBlockedTunable();
tune::Tunable blockedNetworkTunable();

}  // namespace ptopt::layout
