// The Q/DQ operators of PyTorch's PT2E int8 form, known without Python.
//
// Contract. PyTorch defines `quantized_decomposed::quantize_per_tensor`,
// `dequantize_per_tensor` and `dequantize_per_channel` (the ops an int8
// torch.export program calls around float convolutions, linears and adds:
// the form torch.ao's and torchao's PT2E quantization write, and the form
// Inductor's x86 int8 lowering reads) in Python only
// (torch/ao/quantization/fx/_decomposed.py): a C++ process has no schema and
// no kernel for them until that module is imported. ptopt writes int8
// programs in that form (ir/pt2_int8.h) and must read and run them back to
// verify them, so it knows these three here:
//   - qdqSchema: their schemas, as _decomposed.py defines them; ir::findSchema
//     falls back to it for an op no library registered;
//   - qdqKernel: a kernel for each, computing what _decomposed.py computes
//     with the same ATen ops in the same order (so the results are bitwise
//     those of the Python definitions); the Interpreter runs it for such a
//     node when no operator is registered.
//   - decomposeQdqOps: TorchScript resolves every op by its registration, so
//     a model exported to TorchScript (ir/export.h: the driver runs OUT so,
//     and --to torchscript writes it) gets, for each of these ops no library
//     registered, the ATen ops _decomposed.py computes it with, on the model
//     given (a copy); their scale, zero point and axis must be constants (the
//     .default overloads PT2E writes).
// Where the Python module was imported (ptopt called from Python after
// `import torch.ao.quantization.fx._decomposed`), the registered operators
// take precedence and these are not used. Nothing here is registered with the
// dispatcher: no process-wide state.
#pragma once

#include "ir/model.h"

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace ptopt::ir {

inline constexpr const char* kQdqNamespace = "quantized_decomposed";

// The schema of quantized_decomposed::<name>.<overload>, or nullptr when it is
// none of the three.
const c10::FunctionSchema* qdqSchema(const std::string& target, const std::string& overload);

// Runs on the schema's arguments (all of them, defaults filled) and returns
// the results; nullptr when `target.overload` is none of the three.
using QdqKernel = std::vector<c10::IValue> (*)(std::vector<c10::IValue>& args);
QdqKernel qdqKernel(const std::string& target, const std::string& overload);

// Whether `m` calls one of the three that no library registered.
bool hasUnregisteredQdqOps(const Model& m);
// Replaces each such call by its ATen ops; throws std::invalid_argument
// naming the node when a parameter is not a constant.
void decomposeQdqOps(Model& m);

}  // namespace ptopt::ir
