// Loading a TorchScript file with clear errors (see model.h): the file and
// zip checks before LibTorch reads it, the CRCs of the tensor records on a
// second thread while it does, and every tensor checked against the storage
// record it was read from afterwards (LibTorch trusts the sizes in the file).
#include "ir/model.h"

#include "ir/archive_check.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/version.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <future>
#include <system_error>
#include <sys/stat.h>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::ir {

std::string torchErrorMessage(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

namespace {

// A tensor whose sizes and strides reach past its storage (a data/N record
// shorter than data.pkl says, CRC intact) loads without complaint in
// LibTorch and reads out of bounds when used.
// Storage sizes seen (LibTorch sizes a loaded storage by the element count
// data.pkl declares, not by the bytes its data/N record holds).
using StorageSizes = std::unordered_map<const void*, uint64_t>;

void checkTensorFitsStorage(const at::Tensor& t, const std::string& where, StorageSizes& storages) {
  if (!t.defined() || t.layout() != at::kStrided || !t.has_storage()) return;
  storages[t.storage().unsafeGetStorageImpl()] = t.storage().nbytes();
  if (t.numel() == 0) return;
  // Sizes and strides come from the file: overflow is damage, not UB.
  int64_t lowest = t.storage_offset(), highest = t.storage_offset(), reach = 0, elements = 0, needed = 0;
  bool overflow = false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    overflow |= __builtin_mul_overflow(t.size(d) - 1, t.stride(d), &reach);
    int64_t& end = reach < 0 ? lowest : highest;
    overflow |= __builtin_add_overflow(end, reach, &end);
  }
  overflow |= __builtin_add_overflow(highest, int64_t{1}, &elements);
  overflow |= __builtin_mul_overflow(elements, int64_t(t.element_size()), &needed);
  if (overflow)
    throw InputError("tensor " + where + " has sizes and strides that overflow 64 bits");
  if (lowest < 0 || static_cast<uint64_t>(needed) > t.storage().nbytes())
    throw InputError("tensor " + where + " (" + c10::toString(t.scalar_type()) + " " + c10::str(t.sizes()) +
                     ") needs " + std::to_string(needed) + " bytes but its storage in the file holds " +
                     std::to_string(t.storage().nbytes()));
}

void checkTensorsIn(const c10::IValue& v, const std::string& where, std::unordered_set<const void*>& seen,
                    StorageSizes& storages, int depth) {
  if (depth > 200) throw InputError("attribute " + where + " is nested more than 200 levels deep");
  if (v.isTensor()) {
    checkTensorFitsStorage(v.toTensor(), "'" + where + "'", storages);
  } else if (v.isObject()) {
    const auto& object = v.toObjectRef();
    if (!seen.insert(&object).second) return;
    for (size_t i = 0; i < object.slots().size(); ++i)
      checkTensorsIn(object.getSlot(i), where + "." + object.type()->getAttributeName(i), seen, storages, depth + 1);
  } else if (v.isList()) {
    auto list = v.toListRef();
    for (size_t i = 0; i < list.size(); ++i)
      checkTensorsIn(list[i], where + "[" + std::to_string(i) + "]", seen, storages, depth + 1);
  } else if (v.isTuple()) {
    const auto& elements = v.toTupleRef().elements();
    for (size_t i = 0; i < elements.size(); ++i)
      checkTensorsIn(elements[i], where + "[" + std::to_string(i) + "]", seen, storages, depth + 1);
  } else if (v.isGenericDict()) {
    for (const auto& item : v.toGenericDict()) checkTensorsIn(item.value(), where + "[...]", seen, storages, depth + 1);
  }
}

// Tensor constants of the code (constants.pkl) live in the method graphs.
void checkGraphConstants(torch::jit::Block* block, const std::string& method, StorageSizes& storages) {
  for (torch::jit::Node* n : block->nodes()) {
    if (n->kind() == c10::prim::Constant && n->output()->type()->kind() == c10::TypeKind::TensorType)
      if (auto value = torch::jit::toIValue(n->output()))
        checkTensorFitsStorage(value->toTensor(), "constant %" + n->output()->debugName() + " of " + method,
                               storages);
    for (torch::jit::Block* b : n->blocks()) checkGraphConstants(b, method, storages);
  }
}

// Each storage was read from its own record (data/N, constants/N). If the
// storages, largest first, cannot each be matched to a record at least as
// large (records largest first), some storage claims more bytes than its
// record holds: LibTorch would read past the record's buffer.
void checkStoragesFitRecords(const StorageSizes& storages, std::vector<uint64_t> records) {
  std::vector<uint64_t> claimed;
  for (const auto& [impl, bytes] : storages)
    if (bytes > 0) claimed.push_back(bytes);
  std::sort(claimed.rbegin(), claimed.rend());
  std::sort(records.rbegin(), records.rend());
  for (size_t i = 0; i < claimed.size(); ++i)
    if (i >= records.size() || claimed[i] > records[i])
      throw InputError("data.pkl declares a tensor storage of " + std::to_string(claimed[i]) +
                       " bytes, larger than the tensor records in the archive hold");
}

}  // namespace

torch::jit::Module loadTorchScript(const std::string& path) {
  const std::string reexport =
      "save the model with torch.jit.script(model).save(path) or torch.jit.trace(model, example).save(path)";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError("cannot read '" + path + "': " + std::strerror(errno) + " (check the path)");
  if (S_ISDIR(st.st_mode))
    throw InputError("'" + path + "' is a directory, not a TorchScript file (give the .pt file inside it)");
  if (!S_ISREG(st.st_mode))
    throw InputError("'" + path + "' is not a regular file (a device, pipe or socket): give a .pt file");
  if (st.st_size == 0)
    throw InputError("'" + path + "' is an empty file, 0 bytes: the export or download did not finish; "
                     "re-export or re-download it");
  unsigned char magic[4] = {};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot open '" + path + "' for reading (check its permissions)");
    in.read(reinterpret_cast<char*>(magic), 4);
  }
  if (!(magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4)) {
    if (magic[0] == 0x80)
      throw InputError("'" + path + "' is a legacy torch.save() pickle, not TorchScript: " + reexport);
    std::string kind = "not a zip archive";
    if (magic[0] == 0x1F && magic[1] == 0x8B) kind = "a gzip file, not a zip archive";
    else if (magic[0] == 'P' && magic[1] == 'K') kind = "a zip archive that does not start with an entry (damaged?)";
    throw InputError("'" + path + "' is not a TorchScript file (" + kind + "): " + reexport);
  }

  // LibTorch's zip reader trusts sizes and offsets and skips CRCs: check the
  // archive's structure and the CRC-32 of every entry it interprets (code,
  // pickles) first. The tensor records' CRCs (nearly all the bytes) are
  // checked on a second thread while LibTorch loads: it only copies those.
  auto check = [&path](ArchiveLimits::CrcEntries entries) {
    ArchiveLimits limits;
    limits.crcEntries = entries;
    ArchiveCheckResult result;
    try {
      result = checkZipFile(path, limits);
    } catch (const std::system_error& e) {
      throw InputError("cannot read '" + path + "': " + e.code().message());
    }
    if (!result.ok())
      throw InputError("'" + path + "' is damaged or truncated: " + result.problem +
                       "; re-export it with torch.jit.save, or download it again");
    return result;
  };
  ArchiveCheckResult archive = check(ArchiveLimits::CrcEntries::AllButTensorRecords);
  bool hasCode = false, hasDataPickle = false, exportedProgram = false;
  std::vector<uint64_t> tensorRecordSizes;
  for (const auto& entry : archive.entries) {
    const std::string& name = entry.name;
    auto slash = name.find('/');
    std::string record = slash == std::string::npos ? name : name.substr(slash + 1);
    if (record.rfind("code/", 0) == 0 || record == "constants.pkl") hasCode = true;
    if (record == "data.pkl") hasDataPickle = true;
    // torch.export.save's PT2 archive: `archive_format` ("pt2") and the
    // program as JSON under models/.
    if (record == "archive_format" || (record.rfind("models/", 0) == 0 && record.size() > 12 &&
                                       record.compare(record.size() - 5, 5, ".json") == 0))
      exportedProgram = true;
    if (isTensorRecord(name)) tensorRecordSizes.push_back(entry.uncompressedSize);
  }
  if (!hasCode && exportedProgram)
    throw InputError("'" + path + "' looks like a torch.export program (a .pt2 archive) but is not one ptopt " +
                     "reads (no archive_format record saying pt2): save the program again with " +
                     "torch.export.save(ep, path)");
  if (!hasCode && hasDataPickle)
    throw InputError("'" + path + "' is a torch.save() checkpoint (a state_dict or a pickled nn.Module), "
                     "not TorchScript: load it into its nn.Module in Python, then " + reexport);
  if (!hasCode)
    throw InputError("'" + path + "' is a zip archive but not a TorchScript file (no code/ or data.pkl): " +
                     reexport);

  std::future<ArchiveCheckResult> tensorCrcs =
      std::async(std::launch::async, check, ArchiveLimits::CrcEntries::TensorRecords);
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const std::exception& e) {
    tensorCrcs.get();  // damaged bytes explain the failure better
    std::string msg = torchErrorMessage(e);
    std::string hint;
    auto pos = msg.find("Unknown builtin op: ");
    if (pos != std::string::npos) {
      std::string op = msg.substr(pos + 20);
      op = op.substr(0, op.find_first_of(".\n "));
      hint = "\nthe model calls operator '" + op +
             "', which no loaded library registers: load the library that defines it first with "
             "--load-ops LIB.so (C++ API: ptopt::loadOperatorLibrary)";
      if (op.rfind("torchvision::", 0) == 0)
        hint += "; torchvision's C++ ops library provides torchvision:: operators (Debian's python3-torchvision "
                "installs it as /usr/lib/python3/dist-packages/torchvision/_C.cpython-*.so; it loads without "
                "Python)";
    }
    throw InputError("cannot load TorchScript '" + path + "': " + msg + hint);
  }
  tensorCrcs.get();
  try {
    std::unordered_set<const void*> seen;
    StorageSizes storages;
    checkTensorsIn(module._ivalue(), "self", seen, storages, 0);
    for (const auto& sub : module.modules())
      for (const auto& method : sub.get_methods())
        checkGraphConstants(method.graph()->block(), method.name(), storages);
    checkStoragesFitRecords(storages, tensorRecordSizes);
  } catch (const InputError& e) {
    throw InputError("'" + path + "' is damaged: " + e.what() + "; re-export it, or download it again");
  }
  if (!module.find_method("forward"))
    throw InputError("'" + path + "' is TorchScript without a forward() method: script or trace a module "
                     "that defines forward (methods marked @torch.jit.export alone are not enough)");
  return module;
}

}  // namespace ptopt::ir
