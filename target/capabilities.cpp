#include "target/capabilities.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Version.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include "ir/torch_compat.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define PTOPT_X86 1
#endif

namespace ptopt::target {

namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

constexpr CpuIsa kAllIsas[] = {CpuIsa::Default, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16, CpuIsa::Avx512Fp16,
                               CpuIsa::Amx};

bool atLeast(CpuIsa a, CpuIsa b) { return static_cast<int>(a) >= static_cast<int>(b); }
CpuIsa minIsa(CpuIsa a, CpuIsa b) { return atLeast(a, b) ? b : a; }

}  // namespace

std::string isaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Default: return "default";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx512Bf16: return "avx512_bf16";
    case CpuIsa::Avx512Fp16: return "avx512_fp16";
    case CpuIsa::Amx: return "amx";
  }
  return "default";
}

std::optional<CpuIsa> parseIsa(const std::string& name) {
  const std::string n = lower(name);
  for (CpuIsa isa : kAllIsas)
    if (isaName(isa) == n) return isa;
  return std::nullopt;
}

std::string isaChoices() { return "avx2|avx512|avx512_bf16|avx512_fp16|amx"; }

// ---------------------------------------------------------------- CPUID

X86Features probeX86Features() {
  X86Features f;
#ifdef PTOPT_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __get_cpuid_count(1, 0, &a, &b, &c, &d);
  const bool osxsave = c & (1u << 27);
  f.fma = c & (1u << 12);
  uint64_t xcr0 = 0;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
  const bool osAvx = (xcr0 & 0x6) == 0x6;                // SSE and AVX state
  f.osAvx512 = osAvx && (xcr0 & 0xe0) == 0xe0;           // opmask, ZMM_Hi256, Hi16_ZMM
  f.osAmx = osAvx && (xcr0 & 0x60000) == 0x60000;        // XTILECFG, XTILEDATA
  __get_cpuid_count(7, 0, &a, &b, &c, &d);
  const unsigned maxSubleaf = a;
  f.avx2 = osAvx && (b & (1u << 5));
  f.avx512f = b & (1u << 16);
  f.avx512dq = b & (1u << 17);
  f.avx512bw = b & (1u << 30);
  f.avx512vl = b & (1u << 31);
  f.avx512vnni = c & (1u << 11);
  f.amxBf16 = d & (1u << 22);
  f.avx512fp16 = d & (1u << 23);
  f.amxTile = d & (1u << 24);
  f.amxInt8 = d & (1u << 25);
  if (maxSubleaf >= 1) {
    __get_cpuid_count(7, 1, &a, &b, &c, &d);
    f.avx512bf16 = a & (1u << 5);
  }
#endif
  return f;
}

CpuIsa isaOf(const X86Features& f) {
  const bool core = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.osAvx512;
  if (core && f.amxBf16 && f.amxTile && f.osAmx) return CpuIsa::Amx;
  if (core && f.avx512fp16) return CpuIsa::Avx512Fp16;
  if (core && f.avx512bf16) return CpuIsa::Avx512Bf16;
  if (core) return CpuIsa::Avx512;
  if (f.avx2) return CpuIsa::Avx2;
  return CpuIsa::Default;
}

std::string cpuBrand() {
#ifdef PTOPT_X86
  unsigned regs[12] = {};
  if (__get_cpuid_max(0x80000000, nullptr) >= 0x80000004) {
    for (unsigned i = 0; i < 3; ++i)
      __get_cpuid(0x80000002 + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
    char text[49] = {};
    std::memcpy(text, regs, 48);
    std::string s(text);
    // Trim, and collapse the runs of spaces some CPUs pad with.
    std::string out;
    for (char ch : s) {
      if (ch == ' ' && (out.empty() || out.back() == ' ')) continue;
      out += ch;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    if (!out.empty()) return out;
  }
#endif
  return "unknown CPU";
}

// ---------------------------------------------------------------- oneDNN, ATen

std::optional<std::string> onednnIsaCap() {
  for (const char* var : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* v = std::getenv(var); v && *v) return upper(v);
  return std::nullopt;
}

std::optional<CpuIsa> onednnCapLevel(const std::string& capName) {
  // oneDNN's ISA names (2.x and 3.x), each at the highest of our levels it
  // still allows. AVX2_VNNI_2 converts bf16 but has no bf16 dot product.
  static const std::map<std::string, CpuIsa> levels = {
      {"SSE41", CpuIsa::Default},          {"AVX", CpuIsa::Default},
      {"AVX2", CpuIsa::Avx2},              {"AVX2_VNNI", CpuIsa::Avx2},
      {"AVX2_VNNI_2", CpuIsa::Avx2},       {"AVX512_MIC", CpuIsa::Avx2},
      {"AVX512_MIC_4OPS", CpuIsa::Avx2},   {"AVX512_CORE", CpuIsa::Avx512},
      {"AVX512_CORE_VNNI", CpuIsa::Avx512}, {"AVX512_CORE_BF16", CpuIsa::Avx512Bf16},
      {"AVX512_CORE_FP16", CpuIsa::Avx512Fp16}, {"AVX10_1_512", CpuIsa::Avx512Fp16}};
  auto it = levels.find(upper(capName));
  if (it == levels.end()) return std::nullopt;  // ALL, AVX512_CORE_AMX*, unknown names: no cap below amx
  return it->second;
}

bool onednnCapAllowsNativeBf16(const std::string& cap) {
  auto level = onednnCapLevel(cap);
  return !level || atLeast(*level, CpuIsa::Avx512Bf16);
}

CpuIsa atenIsa() {
  static const CpuIsa level = [] {
    // LibTorch says which kernels it dispatches to ("CPU capability usage:
    // AVX2"): the build may lack the AVX-512 ones.
    const std::string config = at::show_config();
    const std::string key = "CPU capability usage:";
    if (auto pos = config.find(key); pos != std::string::npos) {
      std::string rest = config.substr(pos + key.size());
      rest = rest.substr(0, rest.find('\n'));
      rest.erase(0, rest.find_first_not_of(' '));
      rest.erase(rest.find_last_not_of(" \r") + 1);
      const std::string u = upper(rest);
      if (u == "AVX512") return CpuIsa::Avx512;
      if (u == "AVX2") return CpuIsa::Avx2;
      if (u == "DEFAULT" || !u.empty()) return CpuIsa::Default;
    }
    // Older LibTorch: ATen's own rule (the environment caps CPUID).
    const X86Features f = probeX86Features();
    CpuIsa cpu = f.avx512vl && f.avx512bw && f.avx512dq && f.fma && f.osAvx512 ? CpuIsa::Avx512
                 : f.avx2 && f.fma                                           ? CpuIsa::Avx2
                                                                             : CpuIsa::Default;
    if (const char* env = std::getenv("ATEN_CPU_CAPABILITY")) {
      const std::string e = lower(env);
      if (e == "default") cpu = CpuIsa::Default;
      else if (e == "avx2") cpu = minIsa(cpu, CpuIsa::Avx2);
    }
    return cpu;
  }();
  return level;
}

CpuBf16Support probeCpuBf16() {
#ifndef PTOPT_X86
  return {false, "not an x86-64 CPU: ptopt has no bf16 probe for it"};
#else
  const X86Features f = probeX86Features();
  const bool instructions = (f.avx512bf16 && f.osAvx512) || (f.amxBf16 && f.osAmx);
  if (!instructions)
    return {false, f.avx512f ? "no AVX512_BF16 or AMX-BF16 instructions (AVX-512 without bf16)"
                             : "no AVX512_BF16 or AMX-BF16 instructions (no AVX-512)"};
  // PyTorch's own test before it hands bf16 to oneDNN.
  if (!(f.avx512bw && f.avx512vl && f.avx512dq && f.osAvx512))
    return {false, "LibTorch sends bf16 to oneDNN only with AVX-512 BW/VL/DQ"};
  if (!at::hasMKLDNN()) return {false, "this LibTorch is built without oneDNN"};
  if (auto cap = onednnIsaCap(); cap && !onednnCapAllowsNativeBf16(*cap))
    return {false, "oneDNN is capped below bf16 instructions (oneDNN ISA cap " + *cap + ")"};
  if (!at::globalContext().userEnabledMkldnn())
    return {false, "PyTorch's oneDNN use is switched off (userEnabledMkldnn is false)"};
  return {true, f.avx512bf16 ? "AVX512_BF16 instructions, used by oneDNN" : "AMX-BF16 instructions, used by oneDNN"};
#endif
}

namespace {

// LibTorch 2.2 on sends fp16 convs and matmuls to oneDNN's AVX512_FP16 /
// AMX-FP16 kernels; 1.13 has no fp16 CPU convolutions at all.
constexpr bool kLibTorchHasFp16CpuKernels =
    TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2);


}  // namespace

CpuCapabilities probeCpu() {
  CpuCapabilities c;
  c.brand = cpuBrand();
  c.features = probeX86Features();
  c.cpuid = isaOf(c.features);
  c.onednn = c.cpuid;
  if (!at::hasMKLDNN()) c.onednn = CpuIsa::Default;
  else if (auto cap = onednnIsaCap())
    if (auto level = onednnCapLevel(*cap)) c.onednn = minIsa(c.onednn, *level);
  c.aten = atenIsa();
  c.isa = c.onednn;
  const CpuBf16Support bf16 = probeCpuBf16();
  c.nativeBf16 = bf16.native;
  c.bf16Why = bf16.why;
  if (!kLibTorchHasFp16CpuKernels) {
    c.fp16Why = "LibTorch " TORCH_VERSION " has no fp16 CPU kernels for convolutions";
  } else if (!atLeast(c.onednn, CpuIsa::Avx512Fp16)) {
    c.fp16Why = "no AVX512_FP16 instructions that oneDNN uses (" + isaName(c.onednn) + ")";
  } else {
    c.nativeFp16 = true;
    c.fp16Why = "AVX512_FP16 instructions, used by oneDNN";
  }
  return c;
}

CpuCapabilities cpuCapabilities(std::optional<CpuIsa> forced) {
  CpuCapabilities c = probeCpu();
  if (!forced) return c;
  c.assumed = true;
  c.isa = c.onednn = *forced;
  c.aten = minIsa(*forced, CpuIsa::Avx512);
  const std::string by = "assumed " + isaName(*forced) + " (--assume-isa)";
  c.nativeBf16 = atLeast(*forced, CpuIsa::Avx512Bf16);
  c.bf16Why = c.nativeBf16 ? by + ": bf16 dot-product instructions"
                           : by + ": no AVX512_BF16 or AMX-BF16 instructions";
  c.nativeFp16 = kLibTorchHasFp16CpuKernels && atLeast(*forced, CpuIsa::Avx512Fp16);
  c.fp16Why = !kLibTorchHasFp16CpuKernels ? "LibTorch " TORCH_VERSION " has no fp16 CPU kernels for convolutions"
              : c.nativeFp16               ? by + ": AVX512_FP16 instructions"
                                           : by + ": no AVX512_FP16 instructions";
  return c;
}

std::optional<CpuIsa> assumedIsa(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (auto isa = parseIsa(name)) return isa;
  throw std::invalid_argument("unknown CPU level '" + name + "' (choose " + isaChoices() + ")");
}

std::string CpuCapabilities::summary() const {
  std::string s = assumed ? fmt::format("{} (assumed with --assume-isa; this CPU: oneDNN {}, ATen kernels {})",
                                        isaName(isa), isaName(probeCpu().onednn), isaName(atenIsa()))
                          : fmt::format("{} (oneDNN; ATen kernels {})", isaName(isa), isaName(aten));
  return s + fmt::format("; bf16 {}: {}", nativeBf16 ? "native" : "not native", bf16Why);
}

// ---------------------------------------------------------------- CUDA

bool cudaNativeFp16(int major, int minor) { return major >= 7; }
bool cudaNativeBf16(int major, int minor) { return major >= 8; }

CudaCapabilities probeCuda(int index) {
  CudaCapabilities c;
  c.index = index;
  if (!torch::cuda::is_available()) {
    c.why = "no CUDA device (or this LibTorch has no CUDA)";
    return c;
  }
  if (index < 0 || static_cast<size_t>(index) >= torch::cuda::device_count()) {
    c.why = fmt::format("no CUDA device {}", index);
    return c;
  }
  const auto device = compat::cudaDeviceInfo(index);
  if (!device) {
    c.why = "this ptopt was built without CUDA headers: the device cannot be probed";
    return c;
  }
  c.available = true;
  c.name = device->name;
  c.major = device->major;
  c.minor = device->minor;
  const std::string sm = fmt::format("sm_{}{}", c.major, c.minor);
  c.nativeFp16 = cudaNativeFp16(c.major, c.minor);
  c.fp16Why = c.nativeFp16 ? sm + ": fp16 tensor cores" : sm + ": no fp16 tensor cores (sm_70 on)";
  c.nativeBf16 = cudaNativeBf16(c.major, c.minor);
  c.bf16Why = c.nativeBf16 ? sm + ": bf16 tensor cores" : sm + ": no bf16 tensor cores (sm_80 on)";
  return c;
}

std::string CudaCapabilities::summary() const {
  if (!available) return "not available (" + why + ")";
  return fmt::format("{}, sm_{}{}: fp16 {}, bf16 {}", name, major, minor, nativeFp16 ? "native" : "not native",
                     nativeBf16 ? "native" : "not native");
}

// ---------------------------------------------------------------- the target

std::string deviceIdentity(const std::string& targetDevice, std::optional<CpuIsa> assumed) {
  if (targetDevice == "cuda") {
    const CudaCapabilities c = probeCuda();
    if (!c.available) return "cuda: not available (" + c.why + ")";
    return fmt::format("cuda: {}; sm_{}{}", c.name, c.major, c.minor);
  }
  const CpuCapabilities c = cpuCapabilities(assumed);
  std::string s = fmt::format("cpu: {}; oneDNN {}; ATen {}", c.brand, isaName(c.onednn), isaName(c.aten));
  if (c.assumed) s += ", assumed " + isaName(c.isa);
  return s;
}

std::string describeTarget(const std::string& targetDevice, std::optional<CpuIsa> assumed) {
  if (targetDevice == "cuda") return "target cuda: " + probeCuda().summary() + "\n";
  const CpuCapabilities c = cpuCapabilities(assumed);
  return fmt::format("target cpu: {}, {}\n", c.brand, c.summary());
}

AutoPrecision autoPrecision(const std::string& targetDevice, bool preferBf16, std::optional<CpuIsa> assumed) {
  using D = AutoPrecision::Dtype;
  if (targetDevice != "cuda") {
    const CpuCapabilities c = cpuCapabilities(assumed);
    if (c.nativeBf16) return {D::Bf16, "this CPU has native bf16 (" + c.bf16Why + ")"};
    return {D::Fp32, "this CPU has no native bf16 (" + c.bf16Why +
                         "), where bf16 runs slower than fp32 and less accurately"};
  }
  const CudaCapabilities g = probeCuda();
  const D wanted = preferBf16 ? D::Bf16 : D::Fp16;
  if (!g.available)
    return {wanted, std::string(preferBf16 ? "bf16" : "fp16") + " for a CUDA target (no CUDA device here to probe: " +
                        "a GPU of sm_80 or later is assumed)"};
  if (wanted == D::Bf16 && g.nativeBf16) return {D::Bf16, g.bf16Why};
  if (wanted == D::Fp16 && g.nativeFp16) return {D::Fp16, g.fp16Why};
  if (g.nativeFp16) return {D::Fp16, "bf16 is not native on " + g.name + " (" + g.bf16Why + "): fp16 instead"};
  return {D::Fp32, g.name + " has no fp16 or bf16 tensor cores (" + g.fp16Why + "): the graph stays fp32"};
}

}  // namespace ptopt::target
