// cast under --tune (tune/tunable.h): per op the precision table lowers
// (conv, linear, ...), fp32 vs the target dtype with the casts its place in
// the preset's assignment needs (a micro-benchmark on the op's real shapes,
// cached by its signature and its neighbours) -> cast{dtype=...,
// min-channels=0, keep-fp32=<the ops that did not win>}, or no cast at all
// when none won (the model stays fp32). Ops whose two timings were within
// noise are ties: the op-by-op assignment keeps them fp32, a second one
// lowers them too (fp32 only where low precision lost beyond noise), since
// what a tie costs in casts depends on its neighbours' choices. Either is
// kept only when the whole model runs faster with it than with the preset's,
// in one whole-model A/B of the three (TuningSession::preferAmong). dtype=auto resolves as the pass does (bf16
// on CPU, also without native bf16: measured, not assumed); fp16 on a CPU
// target, emulate=true and a given keep-fp32= are kept as given.
#pragma once

#include "tune/tunable.h"

namespace ptopt::quant {

tune::Tunable castTunable();

}  // namespace ptopt::quant
