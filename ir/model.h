// A model in ptopt IR: one Graph per method (forward first) over one shared
// table of named constants, plus TorchScript load/import/export/save.
//
// Import (`importModule`) freezes the module itself, in one pass linear in the
// size of the result: it inlines every method and function call as it
// converts (each callee's optimized graph, the one TorchScript itself runs),
// resolves `prim::GetAttr` chains against the module's attributes (tensors
// become named get_attr constants such as `layer1.0.conv1.weight`, other
// attributes become literals), folds the branches that depend on
// `self.training` (the module is put in eval mode) and other operators whose
// inputs are all literals, and removes dead code. An attribute that a method
// assigns (`self.cell_anchors = ...`, prim::SetAttr) stays module state: its
// value at import goes into the constant table under its path, and every read
// and write of it becomes `prim::GetAttr[name=path]()` /
// `prim::SetAttr[name=path](value)` at its place in the program (ordered like
// side effects; never folded). LibTorch's own freeze_module and Inline are
// not used: both are quadratic in model depth. Numerics are untouched: an
// empty pipeline exports a module whose outputs are bitwise equal to the
// original's.
//
// Export (`exportModel`) builds a fresh TorchScript module: constants become
// buffers named after their path (root attributes with dotted names by
// default, or nested submodules; state_dict() keys are the same, and names
// survive a second import), literals are pooled into prim::Constant nodes,
// and each IR graph becomes a method. The result loads in stock PyTorch.
#pragma once

#include "ir/ir.h"
#include "ir/raise.h"

#include <torch/script.h>

#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ptopt::ir {

// A problem with the user's input (bad file, unsupported model): the CLI
// prints the message and exits with code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Model {
  std::shared_ptr<ConstantTable> constants = std::make_shared<ConstantTable>();
  std::vector<std::pair<std::string, std::unique_ptr<Graph>>> methods;

  Graph& forward() const;
  Graph* method(const std::string& name) const;
  // Deep copy (graphs re-parsed structurally; constant tensors shared).
  Model clone() const;
};

struct ImportOptions {
  // Methods besides forward to keep (and freeze).
  std::vector<std::string> preserveMethods;
  // The inverses of the lowerings, run on a model ptopt wrote (ir/raise.h);
  // ptopt::importModel fills in the default registry's.
  std::vector<RaiseStep> raiseSteps;
};

// Loads a TorchScript file with clear errors for the common mistakes (missing
// file, not a zip archive, a torch.save() checkpoint instead of TorchScript).
torch::jit::Module loadTorchScript(const std::string& path);
Model importModule(const torch::jit::Module& module, const ImportOptions& options = {});

struct ExportOptions {
  std::string className = "ptopt.Model";
  // Constants as a tree of submodules (`self.layer1[0].conv1.weight`) rather
  // than root attributes with dotted names: one GetAttr per path segment on
  // every call instead of one.
  bool nestedAttributes = false;
  // Flat layout only: past this many constants the root would hold, they are
  // spread over submodules of at most constantBucketSize attributes
  // (`self.ptopt_constants_3`, class ConstantBucket). LibTorch finds an
  // attribute by a linear search over its class's attributes (when it adds
  // one, compiles a GetAttr, or loads a file), so 20,000 root attributes cost
  // seconds (quadratic); buckets keep every search short. state_dict() keys
  // then carry the bucket's name as a prefix; importModule() drops it again.
  size_t maxRootConstants = 1024;
  size_t constantBucketSize = 256;
  // Compute load-time values (ir/load_time.h) once, in a holder that the
  // file carries; false: leave them in the graph, run on every call (what
  // a .pt2 does, whose rendering must time what `ep.module()` runs; such a
  // module does not save).
  bool hoistLoadTimeValues = true;
};
inline constexpr const char* kConstantBucketPrefix = "ptopt_constants_";
inline constexpr const char* kConstantBucketClass = "ConstantBucket";
torch::jit::Module exportModel(const Model& model, const ExportOptions& options = {});

// `module` on `device`, leaving `module` as it is. torch::jit::Module::to
// moves each parameter and buffer in place (set_data), and Module::clone()
// and exportModel() share their tensors with where they came from (the
// caller's module, the IR's constants): moving one of those to a GPU would
// move the IR or the caller's model with it. So: a deep copy, moved; on the
// CPU, where nothing has to move, `module` itself.
torch::jit::Module moduleOnDevice(const torch::jit::Module& module, c10::Device device);

// The attribute path of a read or write of module state
// (`prim::GetAttr[name=path]()`, `prim::SetAttr[name=path](value)`), or null.
const std::string* statePath(const Node& n);

// Saves `module` to `path` without ever leaving a partial file: writes a
// temporary file in the same folder, flushes it, reloads it to check that it
// loads, then renames it over `path`. Throws on any failure (and removes the
// temporary file).
void saveModuleAtomically(const torch::jit::Module& module, const std::string& path);

// The streamed, atomic write of a module: the archive goes straight from the
// module's tensors into a temporary file next to `path` (`.NAME.ptopt-tmp-N`),
// never whole in memory. The caller may load the written file back and check
// it before commit() renames it over `path`; a file never committed is removed
// when the object dies, so nothing partial is ever left behind.
class AtomicModuleFile {
 public:
  explicit AtomicModuleFile(std::string path);
  ~AtomicModuleFile();
  AtomicModuleFile(const AtomicModuleFile&) = delete;
  AtomicModuleFile& operator=(const AtomicModuleFile&) = delete;

  // Streams the archive and starts flushing it to disk (fsync, on a thread of
  // its own; commit() waits for it and fails if it did). A failed write (disk
  // full) throws std::runtime_error "cannot write 'PATH': ..." and leaves no
  // file: LibTorch's zip writer is never shown the failure (it would throw
  // again from its destructor and abort the process).
  void write(const torch::jit::Module& module);
  // The same for bytes already serialized (a .pt2 archive).
  void write(const std::string& bytes);
  // Loads the written file back (for the check before commit).
  torch::jit::Module load() const;
  // Renames the file over `path` (keeping the permissions of a file it
  // replaces).
  void commit();
  const std::string& tempPath() const { return tmp_; }
  uint64_t bytesWritten() const { return bytes_; }

 private:
  void writeWith(const std::function<void(std::ostream&)>& produce);
  std::string path_, tmp_;
  uint64_t bytes_ = 0;
  bool written_ = false, committed_ = false;
  std::future<int> synced_;  // the fsync and close: errno, or 0
};

// The pieces of saveModuleAtomically, for callers that check the bytes
// before writing them (ptopt verifies the module reloaded from exactly the
// bytes it writes): the archive in memory, a module loaded from it, and the
// atomic write (`reload`: load the written file back before the rename).
std::string serializeModule(const torch::jit::Module& module);
torch::jit::Module loadSerializedModule(const std::string& bytes);
void writeModuleBytesAtomically(const std::string& bytes, const std::string& path, bool reload);

// Whether the model calls kernels that exist only on CUDA (cuDNN's fused
// convolutions, from fuse-cudnn). Such a model is exported with a root
// attribute `ptopt_requires_cuda = True`, so users (and `ptopt verify`) can
// tell before running it.
bool requiresCuda(const Model& model);
inline constexpr const char* kRequiresCudaAttribute = "ptopt_requires_cuda";

// The message of a c10::Error without its C++ backtrace.
std::string torchErrorMessage(const std::exception& e);

}  // namespace ptopt::ir
