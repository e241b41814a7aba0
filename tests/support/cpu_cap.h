// The suite on a CPU capped to AVX2 (docs/pytorch-worlds.md, "Tests on any CPU").
//
// `ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2` caps ATen's kernels and
// oneDNN, but not PyTorch's choice of bf16 kernels: that one reads CPUID
// (AVX-512 BW/VL/DQ), so on an AVX-512 CPU PyTorch still sends bf16 convs and
// matmuls to oneDNN, which, capped, has no kernel for them ("could not create
// a primitive descriptor"). A real AVX2 CPU sends them to ATen's own bf16
// kernels. followCpuCap() makes the capped process do the same, when a bf16
// conv shows that PyTorch still sends it to oneDNN, by switching
// PyTorch's oneDNN use off (at::globalContext().setUserEnabledMkldnn(false),
// torch.backends.mkldnn.enabled = False in tests/python/cpu_cap.py). fp32
// convs then run in ATen's kernels too instead of oneDNN's AVX2 ones: the
// numbers differ in the last fp32 bits, the layouts convs produce do not.
// PyTorch 2.x asks oneDNN itself (which honours the cap), and 1.13 does with
// cpuinfo capped too (scripts/avx2-cap.sh): there the capped process already
// behaves as an AVX2 CPU does, and oneDNN stays on.
#pragma once

#include <string>

namespace ptopt::test {

// Applies the rule above once per process (catch_main.cpp calls it before
// any test); returns a one-line note when it switched oneDNN off, else "".
std::string followCpuCap();

}  // namespace ptopt::test
