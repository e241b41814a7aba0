#include "tools/load_ops.h"

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
  // The file name carries the Python ABI tag (_C.cpython-311-x86_64-linux-gnu.so).
  for (const char* pattern : {"/usr/lib/python3/dist-packages/torchvision/_C*.so",
                              "/usr/local/lib/python3*/dist-packages/torchvision/_C*.so"}) {
    glob_t found{};
    if (glob(pattern, 0, nullptr, &found) == 0 && found.gl_pathc > 0) {
      std::string path = found.gl_pathv[0];
      globfree(&found);
      return path;
    }
    globfree(&found);
  }
  return "";
}

}  // namespace ptopt
