// The model formats ptopt reads and writes, behind one seam: a TorchScript
// archive (`torch.jit.save`, ir/model.h) and torch.export's PT2 archive
// (`torch.export.save`, ir/pt2.h). The format of IN is told by its
// contents; OUT's by `--to`, else by its extension (`.pt2`), else the
// format of IN. Whatever the format, verification and timing run a
// TorchScript module: the file's own for TorchScript, and for a .pt2 the
// program read back and rendered as a TorchScript module that calls the same
// ATen operators on the same weights (bitwise what `ep.module()` computes on
// the CPU, op for op).
#pragma once

#include "ir/model.h"

#include <optional>
#include <string>

namespace ptopt::ir {

enum class ModelFormat { TorchScript, Pt2 };

// "torchscript", "pt2": the names --to takes.
const char* formatName(ModelFormat f);
std::optional<ModelFormat> parseModelFormat(const std::string& name);
// For messages: "TorchScript", "torch.export (.pt2)".
const char* formatTitle(ModelFormat f);

// By the file's contents (a zip with a PT2 archive's records, or anything
// else, which the TorchScript loader judges with its own messages).
ModelFormat formatOfFile(const std::string& path);
// `to` if given, else .pt2 for a `.pt2` path, else `input`.
ModelFormat formatForOutput(const std::string& path, std::optional<ModelFormat> to, ModelFormat input);

// A module that runs exactly `bytes` (see the top): bytes this process
// wrote (OUT read back), so a program's zip structure is checked and its
// CRC-32s are not checked again. Throws InputError for bytes that do not read.
torch::jit::Module runnableFromBytes(ModelFormat f, const std::string& bytes, const std::string& where);
// A file's bytes, read at once into a buffer of its size; InputError naming
// the path when it cannot be read or is not a regular file.
std::string readFileBytes(const std::string& path);
// The module that runs a program read from a .pt2 (see the top).
torch::jit::Module runnableProgram(const Model& program);
// A TorchScript file loaded (ir::loadTorchScript's checks and messages), or
// a .pt2 read and rendered: what `show`, `dot`, `verify` and `bench` run.
torch::jit::Module loadRunnable(const std::string& path);

}  // namespace ptopt::ir
