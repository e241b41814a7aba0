// The model formats (see model_format.h), and whether a file is a PT2
// archive (pt2.h): a zip with an `archive_format` record under its
// top-level folder. Built in both worlds, so that a 1.13 build names a .pt2
// for what it is.
#include "ir/model_format.h"
#include "ir/pt2.h"

#include "ir/archive_check.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace ptopt::ir {

namespace {
bool namesArchiveFormat(const ArchiveCheckResult& check) {
  for (const ArchiveEntry& e : check.entries) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash + 1, std::string::npos, "archive_format") == 0) return true;
  }
  return false;
}
ArchiveLimits noCrc() {
  ArchiveLimits l;
  l.checkCrc = false;
  return l;
}
}  // namespace

bool isPt2File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[2] = {};
  if (!in.read(magic, 2) || magic[0] != 'P' || magic[1] != 'K') return false;
  try {
    return namesArchiveFormat(checkZipFile(path, noCrc()));
  } catch (const std::exception&) {
    return false;
  }
}

const char* formatName(ModelFormat f) { return f == ModelFormat::Pt2 ? "pt2" : "torchscript"; }

const char* formatTitle(ModelFormat f) { return f == ModelFormat::Pt2 ? "torch.export (.pt2)" : "TorchScript"; }

std::optional<ModelFormat> parseModelFormat(const std::string& name) {
  if (name == "pt2") return ModelFormat::Pt2;
  if (name == "torchscript") return ModelFormat::TorchScript;
  return std::nullopt;
}

ModelFormat formatOfFile(const std::string& path) { return isPt2File(path) ? ModelFormat::Pt2 : ModelFormat::TorchScript; }

ModelFormat formatForOutput(const std::string& path, std::optional<ModelFormat> to, ModelFormat input) {
  if (to) return *to;
  const std::string ext = ".pt2";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0) return ModelFormat::Pt2;
  if (path.empty()) return input;
  return input == ModelFormat::Pt2 && path.size() > 3 && path.compare(path.size() - 3, 3, ".pt") == 0
             ? ModelFormat::TorchScript
             : input;
}

std::string readFileBytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError("cannot read '" + path + "': " + std::strerror(errno) + " (check the path)");
  if (!S_ISREG(st.st_mode)) throw InputError("'" + path + "' is not a regular file: give a model file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open '" + path + "' for reading (check its permissions)");
  // Read straight into a buffer of the file's size (a stringstream would
  // copy the bytes twice); a file that changes meanwhile is read to its end.
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (in.gcount() == st.st_size && in.peek() != std::char_traits<char>::eof()) {
    std::ostringstream rest;
    rest << in.rdbuf();
    bytes += rest.str();
  }
  return bytes;
}

torch::jit::Module runnableFromBytes(ModelFormat f, const std::string& bytes, const std::string& where) {
  if (f == ModelFormat::TorchScript) return loadSerializedModule(bytes);
  return runnableProgram(readPt2(bytes, where, /*writtenHere=*/true).model);
}

torch::jit::Module loadRunnable(const std::string& path) {
  if (formatOfFile(path) == ModelFormat::Pt2) return runnableProgram(readPt2File(path).model);
  return loadTorchScript(path);
}

torch::jit::Module runnableProgram(const Model& program) {
  ExportOptions options;
  options.hoistLoadTimeValues = false;  // as ep.module() runs them: on every call
  return exportModel(program, options);
}

}  // namespace ptopt::ir
