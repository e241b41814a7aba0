// torch.export's PT2 archive (`torch.export.save`, `.pt2`): read into ptopt
// IR and written back, with no Python and no unpickling.
//
// The archive is a zip whose entries sit under one folder: `archive_format`
// ("pt2"), `archive_version`, `models/<name>.json` (the ExportedProgram as
// JSON: a graph of ATen overloads with named, tagged-union arguments, the
// metadata of every tensor value, and a signature that says which
// placeholders are user inputs, parameters, buffers and tensor constants),
// `data/weights/<name>_weights_config.json` and `data/constants/...` (each
// tensor's metadata and the record of its raw storage bytes), and pickled
// sample inputs (never read here).
//
// Read: user inputs become placeholders (with the metadata the program was
// exported at), parameters, buffers and tensor constants become get_attr
// constants named by their module path (`layer1.0.conv1.weight`), and each
// node calls the registered ATen overload its target names
// (`torch.ops.aten.conv2d.default` -> `aten::conv2d`), its named arguments
// placed by the schema (defaults filled in), tensor lists through
// prim::ListConstruct / prim::ListUnpack as TorchScript spells them, several
// user outputs returned as a tuple. Both IRs people save are read:
// `torch.export.export`'s (aten.conv2d, aten.batch_norm, in-place ops) and
// `run_decompositions()`'s (aten.convolution,
// aten._native_batch_norm_legit_no_training). What the IR cannot hold is
// refused with the node named: higher-order ops (torch.cond, while_loop),
// custom objects, tensor subclasses (pickled weights), mutated buffers or
// inputs, symbolic floats and booleans. Symbolic sizes (`dynamic_shapes=`)
// are read as the run-time sizes they are: sym_size and int arithmetic in
// the graph, the hints as the inputs' recorded shapes, the symbols, ranges
// and expressions in Pt2Program::shapes (ir/pt2_symbols.h).
//
// Write: the graph back as an ExportedProgram that `torch.export.load`
// reloads: a program's parameters stay parameters, other constants (folded
// weights, a TorchScript model's tensors) become buffers, every
// tensor value's metadata is what running the graph once on inputs of the
// program's shapes gives (the real strides), weights are raw bytes, the
// schema version is the one of the torch ptopt was built against. The
// calling convention (the pytree specs of inputs and outputs) is the one
// the program was read with, or a flat tuple of tensors in and the graph's
// outputs out. A dynamic program is written dynamic: the graph runs at
// several sizes within its ranges and each size that varies is written as
// the expression its values match (ir/pt2_symbols.h).
#pragma once

#include "ir/model.h"
#include "ir/pt2_symbols.h"

#include <string>
#include <utility>
#include <vector>

namespace ptopt::ir {

// Whether this build reads and writes .pt2 (PyTorch 2.x: the export schema
// version of the torch it was built against is known); and that version.
bool pt2Supported();
std::pair<int, int> pt2SchemaVersion();
// The message for a 1.13 build asked for a .pt2 (`what`: "read", "write").
std::string pt2UnsupportedMessage(const std::string& what);

// What a .pt2 says besides its graph and weights, kept for writing back.
struct Pt2Program {
  std::string modelName = "model";                   // models/<name>.json
  std::string inSpec, outSpec;                       // pytree specs (JSON text); empty: flat
  std::vector<std::string> forwardArgNames;          // the user inputs' names
  std::vector<std::string> parameters, buffers;      // constants' kinds by module path
  std::pair<int, int> schemaVersion{0, 0};
  std::string torchVersion;
  // The archive's sample inputs record as it was (torch.save's pickle of
  // (args, kwargs)): copied into what ptopt writes, never unpickled here.
  std::string sampleInputs;
  // Sizes exported as dynamic (`dynamic_shapes=`): their symbols, ranges and
  // expressions; empty for a static program.
  Pt2Shapes shapes;
};

struct Pt2ReadResult {
  Model model;
  Pt2Program program;
};

// Whether the file is a zip with a PT2 archive's `archive_format` record.
bool isPt2File(const std::string& path);

// A tensor constant as a .pt2 stores it, and torch.export.load gives it
// back: its values in a contiguous, unshared storage (a channels-last
// weight comes back contiguous). `m` with every constant so: what a
// program written from `m` runs on, for timing it (--tune) before it is
// written.
at::Tensor pt2StoredConstant(const at::Tensor& t);
Model withConstantsAsStoredInPt2(const Model& m);

// Reads a PT2 archive. Throws InputError with one line naming the problem
// (damaged zip, wrong archive format or schema version, missing record or
// weight, pickled entry, unsupported node) and what to do.
// `writtenHere`: bytes this process wrote (OUT read back to run it): their
// zip structure is checked, not their CRC-32s.
Pt2ReadResult readPt2(const std::string& bytes, const std::string& where, bool writtenHere = false);
Pt2ReadResult readPt2File(const std::string& path);
// readPt2 without the check that this build supports .pt2, expecting export
// schema `schemaMajor`: the fuzz target's entry (it builds in both worlds).
// Throws InputError only.
Pt2ReadResult parsePt2Archive(const std::string& bytes, const std::string& where, int schemaMajor,
                              bool checkCrc = true);

// Writes `model`'s forward as a PT2 archive. `inputs` are one value per
// placeholder, run once to record every value's metadata (strides
// included). `program` gives the calling convention and the kinds of
// constants that came from a .pt2 (nullptr: a flat tuple in, the graph's
// outputs out, every constant a buffer). Throws
// std::invalid_argument naming the node the format cannot hold (control
// flow, a TorchScript-only op) and what to do.
// A graph with TorchScript's run-time checks of shapes and types (a
// scripted model) is first specialized to `inputs` on a copy
// (ir/specialize.h), as torch.export would have traced it; `notes` gets
// one line per branch so resolved.
std::string writePt2(const Model& model, const std::vector<c10::IValue>& inputs, const Pt2Program* program,
                     std::vector<std::string>* notes = nullptr);

// Inputs of the shapes and dtypes the forward's placeholders record (zeros;
// what writePt2 runs for the metadata of a model read from a .pt2); throws
// std::invalid_argument naming an input without full metadata.
std::vector<c10::IValue> inputsFromMeta(const Graph& forward);

}  // namespace ptopt::ir
