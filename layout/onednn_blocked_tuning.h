// onednn-blocked under --tune (tune/tunable.h), offered on CPU targets with
// shape-prop in the pipeline, after the conv kernels (conv-kernel) and
// before the closing fuse-cudnn or tuned-kernels: the whole model with its
// conv regions on oneDNN tensors and their weights packed when it loads
// (layout/onednn_blocked.h) vs the model as tuned so far (A/B, cached by a
// digest of the graph and the input shapes) -> an onednn-blocked element
// when it wins beyond noise, else none. Given in the pipeline before this
// point, it is kept as given.
#pragma once

#include "tune/tunable.h"

namespace ptopt::layout {

tune::Tunable oneDnnBlockedTunable();

}  // namespace ptopt::layout
