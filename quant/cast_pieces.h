// cast's lists of pieces: a split, split_with_sizes, chunk or unbind (a
// Follow op of the precision table whose one result is a list of tensors)
// and what reads the pieces, for the assignment (quant/cast_assign.cpp) to
// decide whether they stay in the target dtype.
//
// Contract. A list is only unpacked when every use of it is a
// prim::ListUnpack in the split's own block (a list returned, or passed
// whole to cat or a function, is a container). The readers of a piece are
// found through Follow ops with one tensor result (views, transposes,
// activations) and counted once per piece: in fp32 when an op of the
// table's Fp32 class, an op keep-fp32 names, a graph output or a
// control-flow node reads it; low when a LowPrecision op keep-fp32 does not
// name reads it (whether the run lowers it is known only when it is
// visited: its class and keep-fp32 are what tell before). Pure queries: the
// graph is not changed.
#pragma once

#include "ir/ir.h"
#include "quant/precision_policy.h"

#include <cstddef>
#include <set>
#include <string>

namespace ptopt::quant {

// `n` has one result, a list of tensors (split, chunk, unbind).
bool returnsTensorList(const ir::Node* n);

// Every use of `n`'s list is a prim::ListUnpack in `n`'s block.
bool listOnlyUnpacked(const ir::Node* n);

// How many of the pieces an fp32 op reads and how many a low-precision one
// reads (a piece read by both counts in both).
struct PieceReaders {
  size_t fp32 = 0, low = 0;
};
PieceReaders pieceReaders(const ir::Node* n, const PrecisionPolicy& policy, const std::set<std::string>& keepFp32);

}  // namespace ptopt::quant
