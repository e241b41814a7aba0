// Who measured: the identity of the device a tuning decision was timed on,
// the first part of every tuning-cache key (tune/cache.h).
//
// CPU: the brand string (CPUID leaves 0x80000002-4, else /proc/cpuinfo's
// "model name"), the ISA levels oneDNN's and ATen's kernels use (the
// capability probes, target/capabilities.h, or the --assume-isa level) and
// the caps that lower them in this process (ATEN_CPU_CAPABILITY,
// ONEDNN_MAX_CPU_ISA), so that a run capped to AVX2 on an AVX-512 machine
// gets its own decisions. CUDA: the device name and compute capability
// (sm_80). Decisions never travel between identities.
#pragma once

#include "target/capabilities.h"

#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace ptopt::tune {

struct MeasuringDevice {
  std::string kind;   // "cpu" or "cuda"
  std::string name;   // "AMD EPYC 9654 96-Core Processor", "NVIDIA H200"
  std::string isa;    // "avx512_bf16", "avx2 (ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2)", "sm_90"
  // "cpu: <name> [<isa>]".
  std::string str() const;
};
// `assumed`: the run's assumed CPU level (--assume-isa), named in the key.
MeasuringDevice measuringDevice(c10::Device device, std::optional<target::CpuIsa> assumed);

// The CPU's ISA level as LibTorch uses it, with the caps of this process.
std::string isaLevel(std::optional<target::CpuIsa> assumed);

// The LibTorch this was built with ("1.13.0").
std::string libtorchVersion();

}  // namespace ptopt::tune
