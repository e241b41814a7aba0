#include "tune/measuring_device.h"

#include "target/capabilities.h"

#include <torch/version.h>
#include "ir/torch_compat.h"
#include <cstdlib>

namespace ptopt::tune {

std::string isaLevel(std::optional<target::CpuIsa> assumed) {
  // The levels the capability probes report (target/capabilities.h):
  // oneDNN's (CPUID under oneDNN's cap) and ATen's, or the --assume-isa one;
  // the caps of this process are named, so a capped run keys its own
  // decisions.
  const target::CpuCapabilities c = target::cpuCapabilities(assumed);
  std::string level = "oneDNN " + target::isaName(c.onednn) + ", ATen " + target::isaName(c.aten);
  if (c.assumed) level += ", assumed " + target::isaName(c.isa);
  std::string caps;
  if (const char* aten = std::getenv("ATEN_CPU_CAPABILITY"); aten && *aten) caps += std::string("ATEN_CPU_CAPABILITY=") + aten;
  if (auto cap = target::onednnIsaCap()) caps += (caps.empty() ? "" : ", ") + std::string("ONEDNN_MAX_CPU_ISA=") + *cap;
  // The BLAS libraries' own caps (OpenBLAS: Debian's 1.13; MKL: the wheels):
  // linears and ATen's GEMM convs run on them.
  for (const char* blas : {"OPENBLAS_CORETYPE", "MKL_ENABLE_INSTRUCTIONS"})
    if (const char* v = std::getenv(blas); v && *v) caps += (caps.empty() ? "" : ", ") + std::string(blas) + "=" + v;
  return caps.empty() ? level : level + " (" + caps + ")";
}

std::string libtorchVersion() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

std::string MeasuringDevice::str() const { return kind + ": " + name + " [" + isa + "]"; }

MeasuringDevice measuringDevice(c10::Device device, std::optional<target::CpuIsa> assumed) {
  MeasuringDevice id;
  if (device.is_cuda()) {
    id.kind = "cuda";
    if (const auto p = compat::cudaDeviceInfo(device.has_index() ? device.index() : 0)) {
      id.name = p->name;
      id.isa = "sm_" + std::to_string(p->major) + std::to_string(p->minor);
    } else {
      id.name = "CUDA device";
      id.isa = "unknown";
    }
    return id;
  }
  id.kind = "cpu";
  id.name = target::cpuBrand();
  id.isa = isaLevel(assumed);
  return id;
}

}  // namespace ptopt::tune
