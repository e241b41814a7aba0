// The one op-precision table of the cast pass.
//
// Every operator falls in one class (modelled on ATen's autocast lists and
// TVM's ToMixedPrecision always / follow / never):
//   LowPrecision  runs in fp16/bf16: its floating-point inputs are cast down
//                 (weights converted offline) and its result is low precision
//                 (convolutions, linear, matmuls, einsum, prelu, rnn cells,
//                 scaled_dot_product_attention, nn.MultiheadAttention's
//                 fast path `_native_multi_head_attention`, as in ATen's
//                 CPU autocast list);
//   Fp32          runs in fp32: low-precision inputs are cast back first
//                 (softmax, norms, exp/log/pow, reductions, losses,
//                 upsampling); also every operator the table does not know;
//   Follow        takes the precision of its first floating-point input, the
//                 others adapt (activations, pooling, views, reshape, ...;
//                 split, chunk and unbind, whose list of pieces follows
//                 where the list is only unpacked);
//   Promote       several floating-point inputs of equal standing: mixed
//                 precisions go to the widest (add, mul, cat, where, ...);
//   Neutral       reads only metadata (size, dim, numel, device): no casts;
//   Factory       creates a tensor from a dtype argument (zeros, ones, full,
//                 arange, empty, ..._like with a dtype): its float result
//                 adapts to the precision of its consumers.
// Per run, the pass options `fp32-ops=` and `lowp-ops=` move operators into
// the Fp32 or LowPrecision class (names with or without `aten::`).
#pragma once

#include "ir/ir.h"

#include <map>
#include <string>
#include <vector>

namespace ptopt::quant {

enum class OpPrecision { LowPrecision, Fp32, Follow, Promote, Neutral, Factory };

const char* opPrecisionName(OpPrecision p);

class PrecisionPolicy {
 public:
  // The built-in table.
  static PrecisionPolicy defaults();

  // Moves operators (`softmax`, `aten::gelu`) into a class; overrides win
  // over the table.
  void set(const std::string& op, OpPrecision p);
  // Parses an option value: names separated by ',' or ';' (spaces ignored).
  // Throws std::invalid_argument for an empty name.
  static std::vector<std::string> parseOpList(const std::string& text);

  // The class of a call_function node: overloads and in-place variants
  // share their operator's class; a Follow op given a dtype literal
  // (`zeros_like(x, dtype=torch.float32)`) is a Factory. Unknown operators
  // are Fp32. (aten::to and aten::type_as are handled by the pass itself.)
  OpPrecision classify(const ir::Node& n) const;
  // The class of an operator name, or Fp32 when the table does not list it.
  OpPrecision classify(const std::string& op) const;
  // Whether the table (or an override) lists the operator.
  bool knows(const std::string& op) const;

 private:
  std::map<std::string, OpPrecision> table_;  // keys like `aten::conv2d`
};

}  // namespace ptopt::quant
