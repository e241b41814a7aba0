#include "ir/torch_compat.h"

#include <torch/version.h>

#ifdef PTOPT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace ptopt::compat {

const char* torchVersion() { return TORCH_VERSION; }

#ifdef PTOPT_WITH_CUDA

bool cudaCompiledIn() { return true; }

std::optional<CudaDeviceInfo> cudaDeviceInfo(int index) {
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(index);
  return CudaDeviceInfo{p->name, p->major, p->minor};
}

void cudaSynchronize() { c10::cuda::device_synchronize(); }

std::optional<double> cudaEventMs(const std::function<void()>& f) {
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  start.record();
  f();
  stop.record();
  stop.synchronize();
  return static_cast<double>(start.elapsed_time(stop));
}

#else

bool cudaCompiledIn() { return false; }
std::optional<CudaDeviceInfo> cudaDeviceInfo(int) { return std::nullopt; }
void cudaSynchronize() {}
std::optional<double> cudaEventMs(const std::function<void()>&) { return std::nullopt; }

#endif

}  // namespace ptopt::compat
