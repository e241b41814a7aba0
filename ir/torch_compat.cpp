#include "ir/torch_compat.h"

#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <cstring>

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

namespace {

#if TORCH_VERSION_MAJOR >= 2
#define PTOPT_ALLOCATE_CONST
#else
#define PTOPT_ALLOCATE_CONST const
#endif

class FunctionAllocator final : public c10::Allocator {
 public:
  FunctionAllocator(std::function<c10::DataPtr(size_t)> allocate, c10::DeleterFnPtr rawDeleter)
      : allocate_(std::move(allocate)), rawDeleter_(rawDeleter) {}
  c10::DataPtr allocate(size_t n) PTOPT_ALLOCATE_CONST override { return allocate_(n); }
  c10::DeleterFnPtr raw_deleter() const override { return rawDeleter_; }
#if TORCH_VERSION_MAJOR >= 2
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
#endif

 private:
  std::function<c10::DataPtr(size_t)> allocate_;
  c10::DeleterFnPtr rawDeleter_;
};

#undef PTOPT_ALLOCATE_CONST

}  // namespace

std::unique_ptr<c10::Allocator> makeCpuAllocator(std::function<c10::DataPtr(size_t)> allocate,
                                                 void (*rawDeleter)(void*)) {
  return std::make_unique<FunctionAllocator>(std::move(allocate), rawDeleter);
}

}  // namespace ptopt::compat
