// Dead code elimination and the side-effect rules it rests on.
//
// A node is removable when none of its outputs is used and it has no side
// effects. Side effects: writing an input (a mutable schema: relu_, add_,
// append, copy_), writing or reading module state (prim::SetAttr, and
// prim::GetAttr without an object argument, whose order matters), raising, printing, warning, drawing random numbers (removing
// an unused dropout in training mode would shift the RNG stream that later
// random ops see), calls that could not be inlined, operators without a schema
// that ptopt does not know to be pure, opaque operators (below) unless their
// registration declares them pure, and any of these inside a nested block.
//
// Opaque operators. A call_function whose operator lives outside the aten::
// and prim:: namespaces (torchvision::nms, an operator a project registers
// with TORCH_LIBRARY and loads with --load-ops) is opaque: ptopt knows only
// its schema, not what it computes or whether it keeps hidden state (a
// counter, a log, a random stream). Every pass treats it so:
//  - it is kept exactly: target, overload, schema, arguments, attributes;
//  - it has side effects (so dce keeps it even when its results are unused,
//    cse never merges two calls, const-fold and the importer never evaluate
//    it), unless its registration says AliasAnalysisKind::PURE_FUNCTION; even
//    then cse and const-fold leave it alone (isOpaque is checked directly);
//  - its alias annotations are trusted when the operator was registered from
//    its schema (TORCH_LIBRARY's default, FROM_SCHEMA): `Tensor(a!)` writes,
//    `Tensor(a)` aliases. An operator registered CONSERVATIVE may write and
//    alias every mutable argument (opaqueMayWriteAll, ir/mutation.h);
//  - nothing is moved across it: no pass moves a node with side effects, and
//    rewrites insert their replacement where the matched nodes were;
//  - layout and precision passes must give it tensors in the layout and dtype
//    the original model gave it: they put a conversion at its boundary.
#pragma once

#include "ir/ir.h"
#include "ir/mutation.h"  // isOpaque, opaqueMayWriteAll
#include "ir/rewriter.h"

namespace ptopt::ir {

bool hasSideEffects(const Node* n);
// Removes dead nodes in every block, users before producers; returns how
// many were removed. Passes use the Rewriter form (each erase is logged);
// the graph form is for the importer, before any pass runs.
size_t eliminateDeadCode(Rewriter& rw);
size_t eliminateDeadCode(Graph& g);

}  // namespace ptopt::ir
