// Loading shared libraries that register TorchScript operators.
//
// A model that calls `torchvision::nms`, or an operator a project registers
// with TORCH_LIBRARY, loads only once the library defining the operator is
// in the process: its static initializers register the operators with the
// dispatcher. `ptopt --load-ops LIB.so` and ptopt::loadOperatorLibrary do
// that before the model is read. The library is opened with RTLD_NOW (every
// missing symbol is reported now, not at the first call) and RTLD_GLOBAL (a
// library that depends on another loaded one finds its symbols).
#pragma once

#include <string>
#include <vector>

namespace ptopt {

// Opens `path` (a path, or a bare name looked up like any shared library)
// and returns the qualified names of the operators it registered. Throws
// ir::InputError with the loader's message (dlerror()) when it cannot be
// loaded. Loading the same library twice is harmless.
std::vector<std::string> loadOperatorLibrary(const std::string& path);

// Where Debian's python3-torchvision keeps the C++ library that registers
// torchvision's operators (torchvision::nms, torchvision::roi_align, ...),
// or "" when it is not installed. It needs no Python: it links only LibTorch.
std::string findTorchvisionOpsLibrary();

}  // namespace ptopt
