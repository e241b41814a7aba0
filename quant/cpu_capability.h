// What the CPU this process runs on offers for bf16, as LibTorch will use it.
// The probe lives in target/capabilities.h (with the ISA levels, the forced
// level of --assume-isa and the CUDA probe); these names stay for the
// precision code and its tests. probeCpuBf16() is the real CPU's answer;
// the cast pass asks target::autoPrecision, which honours --assume-isa.
#pragma once

#include "target/capabilities.h"

namespace ptopt::quant {

using target::CpuBf16Support;
using target::onednnCapAllowsNativeBf16;
using target::onednnIsaCap;
using target::probeCpuBf16;
using target::probeX86Features;
using target::X86Features;

}  // namespace ptopt::quant
