// What the CPU this process runs on offers for bf16, as LibTorch will use it.
//
// A probe, not a table of CPU models: each call reads CPUID (and, through
// XGETBV, whether the OS saves the AVX-512 / AMX register state), oneDNN's
// ISA cap (ONEDNN_MAX_CPU_ISA, else DNNL_MAX_CPU_ISA: oneDNN reads the same
// variables) and PyTorch's oneDNN switch (torch.backends.mkldnn.enabled,
// at::globalContext().userEnabledMkldnn()).
//
// bf16 is native when LibTorch's bf16 convolutions and matmuls reach
// oneDNN's kernels built on bf16 dot-product instructions (AVX512_BF16 or
// AMX-BF16). Otherwise they run either oneDNN's AVX-512 emulation (fp32
// accumulation, slower than fp32) or, without AVX-512 BW/VL/DQ (an AVX2-only
// CPU) or with oneDNN switched off, ATen's own bf16 kernels, which are much
// slower and whose matmuls round partial sums to bf16 (errors several times
// those of oneDNN's). ATEN_CPU_CAPABILITY plays no part: PyTorch routes bf16
// to oneDNN by CPUID, not by ATen's dispatch level.
//
// Caveat of capping: PyTorch 1.13 and 2.x decide by CPUID alone, so with
// oneDNN capped below AVX-512 on an AVX-512 CPU they still send bf16 convs to
// oneDNN, which has no kernel for them ("could not create a primitive
// descriptor"). A real AVX2 CPU sends them to ATen; so does a process that
// switches PyTorch's oneDNN use off (the test suite does when capped,
// tests/support/cpu_cap.h).
#pragma once

#include <optional>
#include <string>

namespace ptopt::quant {

// CPUID bits that matter for bf16 (all false off x86-64). The `os*` flags
// say whether the OS enabled the register state those instructions need.
struct X86Features {
  bool avx2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512bf16 = false;  // CPUID.(7,1):EAX[5]
  bool amxBf16 = false;     // CPUID.(7,0):EDX[22]
  bool osAvx512 = false;    // XCR0 opmask + ZMM state
  bool osAmx = false;       // XCR0 tile state
};
X86Features probeX86Features();

// oneDNN's ISA cap from the environment, upper-cased ("AVX2"), or nullopt.
std::optional<std::string> onednnIsaCap();
// Whether a cap (as named by oneDNN: SSE41 ... AVX512_CORE_AMX, ALL) still
// lets oneDNN use bf16 dot-product instructions. Unknown names count as no
// cap (oneDNN ignores them too).
bool onednnCapAllowsNativeBf16(const std::string& cap);

struct CpuBf16Support {
  bool native = false;
  std::string why;  // one line, e.g. "no AVX512_BF16 or AMX-BF16 instructions (AVX2 only)"
};
CpuBf16Support probeCpuBf16();

}  // namespace ptopt::quant
