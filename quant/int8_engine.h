// What the quantized engine in use needs from int8 quantization parameters.
//
// reduce_range (activations in [0, 127] instead of [0, 255]): u8 x s8 dot
// products without VNNI instructions (vpmaddubsw) add pairs into a
// saturating int16, so full-range activations overflow; fbgemm (and the x86
// engine of LibTorch 2.x) always ask for it; onednn needs it where oneDNN
// cannot use VNNI (measured with oneDNN capped to AVX2 on this machine: a
// dynamic int8 MLP fell from cosine 0.99994 to 0.9899 without it, back to
// 0.99986 with it; torch.ao warns about the same case).
#pragma once

#include <string>

namespace ptopt::quant {

// Whether oneDNN can use VNNI dot products here: AVX512_VNNI (with the OS
// saving AVX-512 state) under an ISA cap of AVX512_CORE_VNNI or above, or
// AVX_VNNI under a cap of AVX2_VNNI or above (quant/cpu_capability.h reads
// the cap).
bool onednnUsesVnni();

// Whether activations must use reduce_range for the engine in use.
bool int8NeedsReduceRange();

// The engine's name (onednn, fbgemm, qnnpack, x86) and why reduce_range is
// (not) used, for messages.
std::string int8EngineNote();

}  // namespace ptopt::quant
