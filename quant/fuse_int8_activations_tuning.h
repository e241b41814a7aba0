// fuse-int8-activations under --tune (tune/tunable.h): offered, not named.
// Where the pipeline quantizes (it has a quantize element) and the model,
// as quantize left it, has conv + silu/hardswish chains the pass fuses, one
// whole-model A/B on the example inputs: the int8 model as quantize wrote
// it (the baseline) against the same with every chain fused
// (TuningSession::preferOpByOp; confirmed at every --tune-threads count,
// cached by the model's signature) -> a fuse-int8-activations element
// (before fuse-cudnn) when the fused model wins beyond noise, else none.
// Nothing is timed where the pass cannot run (fuseInt8ActivationsMissing:
// LibTorch 1.13, oneDNN's probe, a .pt2 OUT, a CUDA target). Not in
// `--quantize int8`'s pipeline without --tune: measured on two CPUs it
// wins on some models and thread counts and loses on others
// (docs/precision.md), so it is a candidate, never a default.
#pragma once

#include "tune/tunable.h"

namespace ptopt::quant {

tune::Tunable fuseInt8ActivationsTunable();

}  // namespace ptopt::quant
