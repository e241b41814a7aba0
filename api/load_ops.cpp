#include "api/load_ops.h"

#include "ir/model.h"

#include <torch/csrc/jit/runtime/operator.h>

#include <dlfcn.h>
#include <glob.h>

#include <set>

namespace ptopt {

namespace {

std::set<std::string> registeredOperatorNames() {
  std::set<std::string> names;
  for (const auto& op : torch::jit::getAllOperators()) {
    const auto& schema = op->schema();
    names.insert(schema.overload_name().empty() ? schema.name() : schema.name() + "." + schema.overload_name());
  }
  return names;
}

}  // namespace

std::vector<std::string> loadOperatorLibrary(const std::string& path) {
  const std::set<std::string> before = registeredOperatorNames();
  dlerror();  // clear a stale error
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* why = dlerror();
    throw ir::InputError("--load-ops: cannot load '" + path + "': " + (why ? why : "unknown loader error"));
  }
  std::vector<std::string> added;
  for (const auto& name : registeredOperatorNames())
    if (!before.count(name)) added.push_back(name);
  return added;
}

std::string findTorchvisionOpsLibrary() {
  // The torchvision installed beside the torch this build's LibTorch belongs
  // to (PTOPT_TORCHVISION_DIR, from CMake): another one's library is built
  // against another LibTorch and crashes when loaded. The file name carries
  // the Python ABI tag (_C.cpython-311-x86_64-linux-gnu.so) or is
  // _C_stable.so (torchvision 0.29 on).
  const std::string pattern = std::string(PTOPT_TORCHVISION_DIR) + "/_C*.so";
  glob_t found{};
  std::string path;
  if (glob(pattern.c_str(), 0, nullptr, &found) == 0 && found.gl_pathc > 0) path = found.gl_pathv[0];
  globfree(&found);
  return path;
}

}  // namespace ptopt
