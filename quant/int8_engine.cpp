#include "quant/int8_engine.h"

#include "quant/cpu_capability.h"

#include <ATen/Context.h>

#include <algorithm>
#include <cctype>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#define PTOPT_INT8_X86 1
#endif

namespace ptopt::quant {

namespace {

// oneDNN's ISA names in increasing order (the ones a cap may name).
int isaRank(const std::string& cap) {
  static const std::vector<std::string> order = {"SSE41",       "AVX",          "AVX2",
                                                 "AVX2_VNNI",   "AVX2_VNNI_2",  "AVX512_CORE",
                                                 "AVX512_CORE_VNNI", "AVX512_CORE_BF16", "AVX512_CORE_FP16",
                                                 "AVX512_CORE_AMX",  "AVX512_CORE_AMX_FP16", "ALL"};
  auto it = std::find(order.begin(), order.end(), cap);
  return it == order.end() ? static_cast<int>(order.size()) : static_cast<int>(it - order.begin());
}

std::string engineName() {
  std::string e = c10::toString(at::globalContext().qEngine());
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e;
}

}  // namespace

bool onednnUsesVnni() {
#ifndef PTOPT_INT8_X86
  return false;
#else
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx512vnni = (c >> 11) & 1u;
  __cpuid_count(7, 1, a, b, c, d);
  const bool avxvnni = (a >> 4) & 1u;
  const X86Features f = probeX86Features();
  const int cap = isaRank(onednnIsaCap().value_or("ALL"));
  return (avx512vnni && f.osAvx512 && cap >= isaRank("AVX512_CORE_VNNI")) ||
         (avxvnni && cap >= isaRank("AVX2_VNNI"));
#endif
}

bool int8NeedsReduceRange() {
  const std::string e = engineName();
  if (e == "fbgemm" || e == "x86") return true;
  if (e == "onednn" || e == "mkldnn") return !onednnUsesVnni();
  return false;
}

std::string int8EngineNote() {
  const std::string e = engineName();
  return e + (int8NeedsReduceRange() ? ", reduce_range (no VNNI dot products or fbgemm/x86)" : ", full-range activations");
}

}  // namespace ptopt::quant
