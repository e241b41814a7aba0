// What the device a model is optimized for can do, probed, for the passes
// whose profit depends on the machine (cast, channels-last) and for the
// measured decisions of --tune (their cache is keyed on deviceIdentity()).
//
// CPU. Two libraries inside LibTorch pick kernels by instruction set, each
// on its own:
//   * oneDNN (convolutions, matmuls, bf16): CPUID capped by
//     ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA); its levels, lowest first:
//     avx2, avx512 (avx512_core: F/BW/VL/DQ), avx512_bf16, avx512_fp16, amx;
//   * ATen's own vectorized kernels (pointwise ops, reductions): default,
//     avx2 or avx512, chosen once per process (ATEN_CPU_CAPABILITY caps it;
//     a build may stop at avx2, as Debian's 1.13 does), read back from
//     LibTorch's own configuration string.
// CpuCapabilities::isa is oneDNN's level (where the time of a conv net
// goes); bf16 is native when LibTorch's bf16 convs and matmuls reach oneDNN
// kernels built on bf16 dot-product instructions (avx512_bf16 or amx; see
// probeCpuBf16 for the other conditions).
//
// An assumed level (`ptopt --assume-isa avx2`, PassContext::assumedIsa)
// replaces the probe in cpuCapabilities(assumed), so that the decisions that
// follow from it are tested on any machine; kernels still run on the real
// CPU. The level is a value handed down with the run, never process state:
// two runs in one process assume each their own.
//
// Caveat of capping: PyTorch 1.13 and 2.x send bf16 to oneDNN by CPUID
// alone, so with oneDNN capped below AVX-512 on an AVX-512 CPU they still
// send bf16 convs to it, which has no kernel for them ("could not create a
// primitive descriptor"). A real AVX2 CPU sends them to ATen; so does a
// process that switches PyTorch's oneDNN use off (tests/support/cpu_cap.h).
//
// CUDA: the device's name, compute capability and native fp16 (tensor
// cores, sm_70 on) and bf16 (sm_80 on), through at::cuda when this LibTorch
// has CUDA (ir/torch_compat.h), else "not available".
#pragma once

#include "target/kernel_probes.h"  // convRunsChannelsLast, the kernel probes

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::target {

// ---- CPU

// Lowest first; `Default` is below AVX2 (SSE only, or not x86-64).
enum class CpuIsa { Default = 0, Avx2, Avx512, Avx512Bf16, Avx512Fp16, Amx };
// "default", "avx2", "avx512", "avx512_bf16", "avx512_fp16", "amx".
std::string isaName(CpuIsa isa);
// The names above (case-insensitive), or nullopt.
std::optional<CpuIsa> parseIsa(const std::string& name);
// "avx2|avx512|avx512_bf16|avx512_fp16|amx" (for messages).
std::string isaChoices();

// CPUID bits (all false off x86-64). The `os*` flags say whether the OS
// enabled the register state those instructions need (XGETBV).
struct X86Features {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false;
  bool avx512bf16 = false;  // CPUID.(7,1):EAX[5]
  bool avx512fp16 = false;  // CPUID.(7,0):EDX[23]
  bool amxBf16 = false;     // CPUID.(7,0):EDX[22]
  bool amxTile = false, amxInt8 = false;  // EDX[24], EDX[25]
  bool osAvx512 = false;    // XCR0 opmask + ZMM state
  bool osAmx = false;       // XCR0 tile state
};
X86Features probeX86Features();
// The highest level the features (and the OS) allow.
CpuIsa isaOf(const X86Features& f);
// The CPUID brand string ("AMD EPYC 9R14 96-Core Processor"), trimmed;
// "unknown CPU" when there is none.
std::string cpuBrand();

// oneDNN's ISA cap from the environment, upper-cased ("AVX2"), or nullopt.
std::optional<std::string> onednnIsaCap();
// The level a cap (as oneDNN names it: SSE41 ... AVX512_CORE_AMX, ALL)
// allows at most; nullopt for no cap (ALL, names oneDNN ignores).
std::optional<CpuIsa> onednnCapLevel(const std::string& cap);
// Whether a cap still lets oneDNN use bf16 dot-product instructions.
bool onednnCapAllowsNativeBf16(const std::string& cap);
// ATen's kernel level in this process: LibTorch's "CPU capability usage"
// (at::show_config), else ATEN_CPU_CAPABILITY, else the CPUID rule.
CpuIsa atenIsa();

struct CpuBf16Support {
  bool native = false;
  std::string why;  // one line, e.g. "no AVX512_BF16 or AMX-BF16 instructions (no AVX-512)"
};
// The real CPU, whatever is assumed: bf16 is native when the instructions
// are there (and enabled by the OS), PyTorch's own AVX-512 BW/VL/DQ test
// passes, LibTorch has oneDNN, oneDNN is not capped below them and
// PyTorch's oneDNN use is on.
CpuBf16Support probeCpuBf16();

struct CpuCapabilities {
  std::string brand;         // cpuBrand()
  X86Features features;      // the real CPU's
  CpuIsa cpuid = CpuIsa::Default;   // what the CPU and OS offer
  CpuIsa onednn = CpuIsa::Default;  // cpuid capped by oneDNN's cap
  CpuIsa aten = CpuIsa::Default;    // ATen's kernels (default, avx2 or avx512)
  CpuIsa isa = CpuIsa::Default;     // the level decisions use: oneDNN's, or the assumed one
  bool assumed = false;             // isa was assumed (--assume-isa)
  bool nativeBf16 = false;
  std::string bf16Why;
  bool nativeFp16 = false;          // fp16 convs/matmuls in native kernels (LibTorch >= 2.2 and avx512_fp16/amx)
  std::string fp16Why;
  // "avx512_bf16 (oneDNN; ATen kernels avx2); bf16 native: AVX512_BF16
  // instructions, used by oneDNN"; "assumed avx2 (--assume-isa) ..." when
  // forced.
  std::string summary() const;
};
// The real CPU (ignores an assumed level).
CpuCapabilities probeCpu();
// What the passes consult: the real CPU (nullopt), or the assumed level in
// its place: isa, onednn and aten take the level (aten at most avx512), and
// bf16 / fp16 are native exactly when the level has their instructions.
CpuCapabilities cpuCapabilities(std::optional<CpuIsa> assumed);

// The level a run assumes, from its name as the request and PassContext
// carry it ("" : none, probe the CPU). Throws std::invalid_argument for an
// unknown name (the choices: isaChoices()).
std::optional<CpuIsa> assumedIsa(const std::string& name);

// ---- CUDA

struct CudaCapabilities {
  bool available = false;
  std::string why;  // when not available: "this LibTorch has no CUDA", "no CUDA device"
  int index = 0;
  std::string name;  // "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
  bool nativeFp16 = false, nativeBf16 = false;  // tensor cores: sm_70 / sm_80 on
  std::string fp16Why, bf16Why;
  std::string summary() const;  // "NVIDIA H200, sm_90: fp16 native, bf16 native"
};
// Probes device `index` (no CUDA: available=false and why).
CudaCapabilities probeCuda(int index = 0);
// Native fp16 / bf16 by compute capability (separately, for tests).
bool cudaNativeFp16(int major, int minor);
bool cudaNativeBf16(int major, int minor);

// ---- The target device ("cpu" or "cuda", as PassContext::targetDevice)

// One line that identifies the target for a cache of measured decisions:
// "cpu: AMD EPYC 9R14 96-Core Processor; oneDNN avx512_bf16; ATen avx2"
// (", assumed avx2" when forced), or "cuda: NVIDIA H200; sm_90" (the CUDA
// line when CUDA is not available here: "cuda: not available (...)").
// `assumed`: the run's assumed CPU level (nullopt: the CPU's own).
std::string deviceIdentity(const std::string& targetDevice, std::optional<CpuIsa> assumed);
// A few lines for --explain / `ptopt show --device-info`: every probe.
std::string describeTarget(const std::string& targetDevice, std::optional<CpuIsa> assumed);

// The precision cast{dtype=auto} should lower to on the target, or nullopt
// to stay fp32, with the reason. `preferBf16` asks for bf16 on CUDA.
// CPU: bf16 when native (cpuCapabilities(assumed)), else fp32. CUDA: fp16 (bf16
// with preferBf16); when CUDA is available here and the device lacks the
// precision natively, the other native one, else fp32. With no CUDA here the
// CUDA rule assumes a current GPU (nothing to probe).
struct AutoPrecision {
  enum class Dtype { Fp32, Bf16, Fp16 } dtype = Dtype::Fp32;
  std::string why;
};
AutoPrecision autoPrecision(const std::string& targetDevice, bool preferBf16, std::optional<CpuIsa> assumed);

}  // namespace ptopt::target
