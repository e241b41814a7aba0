// Dead code elimination and the side-effect rules it rests on.
//
// A node is removable when none of its outputs is used and it has no side
// effects. Side effects: writing an input (a mutable schema: relu_, add_,
// append, copy_), raising, printing, warning, drawing random numbers (removing
// an unused dropout in training mode would shift the RNG stream that later
// random ops see), calls that could not be inlined, operators without a schema
// that ptopt does not know to be pure, and any of these inside a nested block.
#pragma once

#include "ir/ir.h"

namespace ptopt::ir {

bool hasSideEffects(const Node* n);
// Removes dead nodes in every block; returns how many were removed.
size_t eliminateDeadCode(Graph& g);

}  // namespace ptopt::ir
