// What differs between the LibTorch builds ptopt compiles against, in one
// place: Debian's 1.13 (CPU only, c10's own optional) and PyPI's 2.x (CUDA
// compiled in, c10::optional an alias of std::optional, C++17, CXX11 ABI).
// The rest of the tree calls these and has no #if of its own; the CUDA
// branches are compiled where this LibTorch has CUDA (PTOPT_WITH_CUDA, set
// by ir/CMakeLists.txt for torch_cuda on torch_compat.cpp only) and answer "not compiled in"
// elsewhere.
#pragma once

#include <c10/util/Optional.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace c10 {
class DataPtr;
struct Allocator;
}  // namespace c10

namespace ptopt::compat {

// The optional type of LibTorch's own signatures (c10::optional in 1.13,
// std::optional in 2.x): spelled once so both compile.
template <typename T>
using TorchOptional = c10::optional<T>;
inline constexpr auto kTorchNullopt = c10::nullopt;

// "2.15.0" / "1.13.0": the LibTorch headers compiled against.
const char* torchVersion();
// Whether this build compiled ptopt's CUDA code paths (CUDA device
// properties, CUDA events, device synchronization).
bool cudaCompiledIn();

struct CudaDeviceInfo {
  std::string name;   // "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
};
// The properties of CUDA device `index`; nullopt when CUDA is not compiled
// in (the caller checks that the device exists).
std::optional<CudaDeviceInfo> cudaDeviceInfo(int index);
// Waits for every queued kernel of the current CUDA device; nothing without CUDA.
void cudaSynchronize();
// Milliseconds `f` took on the current CUDA stream, timed by CUDA events;
// nullopt when CUDA is not compiled in.
std::optional<double> cudaEventMs(const std::function<void()>& f);

// A CPU allocator made of a function: c10::Allocator's allocate() is const
// in 1.13 and not in 2.x, and 2.x adds copy_data(). `rawDeleter` is what
// raw_deleter() answers: the deleter of every DataPtr `allocate` returns
// whose context is its data (raw_allocate() relies on it).
std::unique_ptr<c10::Allocator> makeCpuAllocator(std::function<c10::DataPtr(size_t)> allocate,
                                                 void (*rawDeleter)(void*));

}  // namespace ptopt::compat
