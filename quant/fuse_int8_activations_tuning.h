// fuse-int8-activations under --tune (tune/tunable.h): offered, not named.
// Where the pipeline quantizes (it has a quantize element) and the model,
// as quantize left it, has conv + silu/hardswish or linear + gelu/silu/
// hardswish chains the pass fuses, or int8 convs, one
// whole-model A/B on the example inputs: the int8 model as quantize wrote
// it (the baseline), the same with every chain fused, (when it differs)
// with the chains on images larger than 1x1 fused (a squeeze-excite's 1x1
// convs cost oneDNN more per call than the work), and, where it has int8
// convs heading no chain, with its depthwise convs and with every int8
// conv on oneDNN's kernel too (`plain=`: the x86 engine's own kernels are
// slow for some shapes on some CPUs) (TuningSession::
// preferAmong; confirmed at every --tune-threads count, cached by the
// model's signature) -> a fuse-int8-activations element (before
// fuse-cudnn, `convs=` naming the larger ones for the second) when one wins
// beyond noise, else none.
// Nothing is timed where the pass cannot run (fuseInt8ActivationsMissing:
// LibTorch 1.13, oneDNN's probe, a .pt2 OUT, a CUDA target). Not in
// `--quantize int8`'s pipeline without --tune: measured natively and under
// the AVX2 cap it wins at some thread counts and loses at others
// (docs/tuning.md), so it is a candidate, never a default.
#pragma once

#include "tune/tunable.h"

namespace ptopt::quant {

tune::Tunable fuseInt8ActivationsTunable();

}  // namespace ptopt::quant
