// bn-to-affine under --tune (tune/tunable.h): per inference BatchNorm at the
// top level, batch_norm vs addcmul(shift, x, scale), a micro-benchmark on the
// op's real shapes cached by its signature -> bn-to-affine{nodes=<those where
// addcmul won>}. An element with force=true or nodes= is kept as given.
#pragma once

#include "tune/tunable.h"

namespace ptopt::fusion {

tune::Tunable bnToAffineTunable();

}  // namespace ptopt::fusion
