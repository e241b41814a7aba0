#include "tune/device_id.h"

#include "quant/cpu_capability.h"

#include <torch/version.h>
#ifdef PTOPT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>
#include <fstream>

namespace ptopt::tune {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0' || s.back() == '\n')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

std::string cpuBrand() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      __get_cpuid(0x80000002u + leaf, &a, &b, &c, &d);
      std::memcpy(brand + leaf * 16, &a, 4);
      std::memcpy(brand + leaf * 16 + 4, &b, 4);
      std::memcpy(brand + leaf * 16 + 8, &c, 4);
      std::memcpy(brand + leaf * 16 + 12, &d, 4);
    }
    std::string s = trim(brand);
    if (!s.empty()) return s;
  }
#endif
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  return "unknown CPU";
}

}  // namespace

std::string isaLevel() {
  const quant::X86Features f = quant::probeX86Features();
  std::string level = "default";
  if (f.avx2) level = "avx2";
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.osAvx512) level = "avx512";
  if (level == "avx512" && f.avx512bf16) level = "avx512_bf16";
  if (f.amxBf16 && f.osAmx) level = "amx";
  std::string caps;
  if (const char* aten = std::getenv("ATEN_CPU_CAPABILITY"); aten && *aten) caps += std::string("ATEN_CPU_CAPABILITY=") + aten;
  if (auto cap = quant::onednnIsaCap()) caps += (caps.empty() ? "" : ", ") + std::string("ONEDNN_MAX_CPU_ISA=") + *cap;
  return caps.empty() ? level : level + " (" + caps + ")";
}

std::string libtorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

std::string DeviceIdentity::str() const { return kind + ": " + name + " [" + isa + "]"; }

DeviceIdentity deviceIdentity(c10::Device device) {
  DeviceIdentity id;
  if (device.is_cuda()) {
    id.kind = "cuda";
#ifdef PTOPT_WITH_CUDA
    const int index = device.has_index() ? device.index() : 0;
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(index);
    id.name = p->name;
    id.isa = "sm_" + std::to_string(p->major) + std::to_string(p->minor);
#else
    id.name = "CUDA device";
    id.isa = "unknown";
#endif
    return id;
  }
  id.kind = "cpu";
  id.name = cpuBrand();
  id.isa = isaLevel();
  return id;
}

}  // namespace ptopt::tune
