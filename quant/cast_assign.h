// cast's work in two jobs, each a file: the assignment (this header,
// quant/cast_assign.cpp: which ops run in the target dtype, decided in one
// walk by the op-policy table and the contract's conditions) and the
// materialization (quant/cast_values.h: each value's state and the casts,
// converted constants and retargeted factories the decisions need). The
// pass itself (quant/cast.h) turns its options into a CastAssignment.
#pragma once

#include "ir/ir.h"
#include "quant/precision_policy.h"
#include "rewriters/pass.h"

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <set>
#include <string>

namespace ptopt::quant {

// What the assignment decides with.
struct CastAssignment {
  c10::ScalarType target = c10::ScalarType::BFloat16;
  bool keepIo = true, clamp = false, emulate = false;
  bool cpuKernelsOnly = false;  // bf16 for a CPU target: ops without a CPU kernel in it stay fp32
  int64_t minChannels = 0;      // convs with fewer input and output channels stay fp32
  PrecisionPolicy policy;
  std::set<std::string> keepFp32;  // keep-fp32: these ops (by result name) stay fp32
};

// Walks `graph` once and lowers what the contract lets run in
// `config.target`, editing through a rewriter named `pass`; the result's
// counters are the pass's (lowered, casts, weights, literals, fp32, ...).
rewriters::PassResult assignPrecisions(ir::Graph& graph, rewriters::PassContext& ctx, const std::string& pass,
                                       CastAssignment config);

}  // namespace ptopt::quant
