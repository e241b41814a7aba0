// fuse-cudnn under --tune (tune/tunable.h): on a CUDA target and device, the
// whole model with and without cuDNN's fused conv+add+relu (A/B, cached by a
// digest of the graph and the input shapes) -> the element kept or dropped.
// Elsewhere it is kept (the pass declines itself).
#pragma once

#include "tune/tunable.h"

namespace ptopt::fusion {

tune::Tunable fuseCudnnTunable();

}  // namespace ptopt::fusion
