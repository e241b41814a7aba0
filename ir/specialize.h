// Specializing a graph to the shapes of given inputs, for a format without
// control flow (a torch.export program written from a TorchScript model).
//
// TorchScript code checks shapes, dtypes and None-ness at run time
// (`if input.dim() != 4: raise ...` in every BatchNorm,
// `x.view(x.size(0), -1)`), where torch.export traces them away for the
// inputs it was given. specializeToInputs does the same, exactly and no
// further: it runs the graph once on `inputs` and replaces every non-tensor
// value that is a function of tensor metadata alone by the literal it took,
// then inlines each top-level prim::If whose condition became a literal (its
// other branch is dropped), takes apart tuples built only to be unpacked,
// and repeats until nothing changes. A value is a
// function of metadata alone when it is a literal or the result of
//   - a metadata query of a tensor: aten::size, aten::dim, aten::numel,
//     aten::len, prim::dtype, prim::device, prim::layout, prim::is_cuda,
//     aten::is_floating_point, aten::__is__ / __isnot__ (None checks);
//   - a side-effect-free operator with no tensor argument whose arguments
//     are all such values (arithmetic, comparisons, list building,
//     prim::unchecked_cast, ...).
// A value read from tensor data (aten::item, aten::Int(Tensor)) never is:
// a branch on data stays, and the writer names it. Loops are left as they
// are (the writer names them).
#pragma once

#include "ir/ir.h"

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace ptopt::ir {

struct Specialization {
  size_t literals = 0;   // values replaced by the literal they took
  size_t branches = 0;   // prim::If inlined
  std::vector<std::string> notes;  // one per branch resolved: its source line and what it tested
};

// Throws InterpreterError when the graph does not run on `inputs`.
Specialization specializeToInputs(Graph& graph, const std::vector<c10::IValue>& inputs);

}  // namespace ptopt::ir
