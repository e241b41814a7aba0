// Where an int8 model's time goes, op kind by op kind, beside the model it
// replaces: what the never-slower stage says when an int8 OUT lost to its
// input and a fallback is written instead, so that "fell
// back to fp32" comes with the op that forced it and what it cost.
//
// Contract.
//   timeOpKinds runs a TorchScript module on its inputs `runs` times (after
//   one warm-up run) on the calling thread and returns, per operator name
//   (aten::conv2d, quantized::conv2d_relu, aten::dequantize, ...), the
//   calls and the milliseconds per inference of the ops the module's
//   interpreter calls itself: the outermost operator calls seen by a
//   thread-local RecordFunction callback, installed for the duration of the
//   call only (nothing process-wide stays behind). Times are wall time on
//   this thread, the operators' own dispatch included; what the interpreter
//   spends between ops is not in them.
//   precisionBoundaries reads the module's forward graph and counts, per
//   operator kind, the ops that a quantize_per_tensor reads from or a
//   dequantize feeds (the float ops between int8 regions: each costs an
//   exit and an entry); a list or tuple a dequantized value goes into is
//   followed to its readers; ops inside nested blocks are not counted.
//   hasQuantizedOps says whether a (forward) graph calls a quantized:: or
//   onednn:: int8 operator at its top level (an int8 model
//   with no float op between its int8 regions has no boundary to count).
//   lossLines formats both as the lines the stage prints: the op kinds whose
//   time grew most from IN to OUT, with calls and milliseconds on each side,
//   then the float ops that forced the boundaries.
#pragma once

#include <torch/script.h>

#include <map>
#include <string>
#include <vector>

namespace ptopt::driver {

struct OpKindCost {
  size_t calls = 0;  // per inference
  double ms = 0;     // per inference
};
using OpKindCosts = std::map<std::string, OpKindCost>;

OpKindCosts timeOpKinds(torch::jit::Module module, const std::vector<c10::IValue>& inputs, int runs);

// Operator kind -> how many boundary conversions it forces.
std::map<std::string, size_t> precisionBoundaries(const torch::jit::Module& module);
bool hasQuantizedOps(const torch::jit::Graph& graph);

// At most `top` op kinds, the largest growth first.
std::vector<std::string> lossLines(const OpKindCosts& in, const OpKindCosts& out,
                                   const std::map<std::string, size_t>& boundaries, size_t top = 6);

}  // namespace ptopt::driver
