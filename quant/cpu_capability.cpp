#include "quant/cpu_capability.h"

#include <ATen/Context.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define PTOPT_X86 1
#endif

namespace ptopt::quant {

X86Features probeX86Features() {
  X86Features f;
#ifdef PTOPT_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __get_cpuid_count(1, 0, &a, &b, &c, &d);
  const bool osxsave = c & (1u << 27);
  uint64_t xcr0 = 0;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
  const bool osAvx = (xcr0 & 0x6) == 0x6;  // SSE and AVX state
  f.osAvx512 = osAvx && (xcr0 & 0xe0) == 0xe0;              // opmask, ZMM_Hi256, Hi16_ZMM
  f.osAmx = osAvx && (xcr0 & 0x60000) == 0x60000;           // XTILECFG, XTILEDATA
  __get_cpuid_count(7, 0, &a, &b, &c, &d);
  const unsigned maxSubleaf = a;
  f.avx2 = osAvx && (b & (1u << 5));
  f.avx512f = b & (1u << 16);
  f.avx512dq = b & (1u << 17);
  f.avx512bw = b & (1u << 30);
  f.avx512vl = b & (1u << 31);
  f.amxBf16 = d & (1u << 22);
  if (maxSubleaf >= 1) {
    __get_cpuid_count(7, 1, &a, &b, &c, &d);
    f.avx512bf16 = a & (1u << 5);
  }
#endif
  return f;
}

std::optional<std::string> onednnIsaCap() {
  for (const char* var : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    if (const char* v = std::getenv(var); v && *v) {
      std::string s(v);
      std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::toupper(ch); });
      return s;
    }
  }
  return std::nullopt;
}

bool onednnCapAllowsNativeBf16(const std::string& cap) {
  // oneDNN's ISA names below avx512_core_bf16 (2.x and 3.x); AVX2_VNNI_2
  // converts bf16 but has no bf16 dot product.
  static const std::set<std::string> below = {"SSE41",      "AVX",        "AVX2",           "AVX2_VNNI",
                                              "AVX2_VNNI_2", "AVX512_MIC", "AVX512_MIC_4OPS", "AVX512_CORE",
                                              "AVX512_CORE_VNNI"};
  return below.count(cap) == 0;
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

}  // namespace ptopt::quant
