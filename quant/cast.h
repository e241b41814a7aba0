// cast: run compute-bound operators in fp16 or bf16, with casts only where
// the precision changes.
// The contract is kContract below (`ptopt passes cast` prints it).
#pragma once

#include "quant/precision_policy.h"
#include "rewriters/pass.h"

#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace ptopt::quant {

class CastPass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "Walks the graph in program order and gives every fp32 tensor value a precision, following the one "
      "op-policy table (quant/precision_policy.h): a LowPrecision op (conv, linear, matmul, bmm, addmm, einsum, "
      "prelu, rnn cells, sdpa) whose floating-point inputs are fp32 runs in the target dtype; an Fp32 op "
      "(softmax, log_softmax, layer_norm, group_norm, batch_norm, exp, log, pow, rsqrt, reductions, norms, "
      "losses, upsample) and every op the table does not know get their inputs back in their original dtype; "
      "Follow ops take the precision of their first floating-point input; Promote ops with mixed precisions go "
      "to the widest, except `aten::mul` in bf16 of a lowered tensor by a float32 one with at most 1/16 of its "
      "elements (a squeeze-excite gate, a per-channel scale): the factor is cast down and the product runs in "
      "bf16 (counter factors-lowered; bf16 keeps float32's range, and the scaled tensor was bf16 already). "
      "Weights (float32 constants) read by ops that run in low precision are converted offline into new "
      "constants (conv1.weight_bf16; the pass runs after the folds, so it converts the folded weights, never "
      "unfolded ones), dense in the layout they had (channels-last weights stay channels-last); the fp32 "
      "originals are erased when nothing else reads them. Activations are converted by aten::to(x, dtype) "
      "inserted right before the op that needs them, memoized per (value, dtype) wherever the earlier cast "
      "dominates and the value is never written in place; a cast back to a cast's own source returns that source "
      "(adjacent casts cancel). Integer, bool and float64 tensors are never touched (an integer or bool input "
      "of a LowPrecision op, such as scaled_dot_product_attention's bool mask, stays as it is while the op's "
      "fp32 inputs are lowered; a float64 input keeps the op in fp32); a value whose dtype is "
      "unknown (no shape-prop metadata) is left alone, except as an input of a LowPrecision op whose other "
      "operand is fp32 (those kernels require equal dtypes). "
      "dtype literals: x.to(torch.float32) of a low-precision x becomes x.to(<target>) (it was a no-op); a "
      "factory op (zeros, ones, full, arange, empty, ..._like with a dtype) whose float32 result is only read at "
      "the target precision gets the target dtype literal; type_as and to(x, other) follow their dtype source at "
      "run time and are tracked, so no op sees mixed floating-point types. An in-place op (relu_, add_) works in "
      "the precision of the tensor it writes (one the table keeps fp32, like silu_ on a CPU with 1.13, that writes a "
      "lowered op's fresh result runs on an fp32 copy); an op the table does not know that returns a view of its "
      "first input follows it. _add_relu has no fp16/bf16 kernel: lowered, it is split into add and relu_ "
      "(counter split). A split, split_with_sizes, chunk or unbind of a lowered tensor whose list of pieces is "
      "only unpacked (prim::ListUnpack) and never written keeps its pieces lowered: no cast of the whole tensor "
      "up before it and of each piece down after it (GPT-2's and LeViT's fused q/k/v projections; counter "
      "lists-kept). Control flow: values enter and leave prim::If / prim::Loop blocks, containers (tuples, "
      "lists not consumed by cat/stack/einsum, other lists of pieces) and prim::dtype in their original dtype. "
      "Options: dtype=auto|bf16|fp16 (auto: bf16 for CPU targets, fp16 for CUDA targets unless prefer-bf16 or "
      "PassContext::preferBf16; for a CPU target without native bf16 (quant/cpu_capability.h: no "
      "AVX512_BF16/AMX-BF16 that oneDNN uses, probed) auto leaves the graph in fp32, declined once: bf16 would "
      "run slower than fp32 there, and less accurately); keep-io=true keeps the graph's inputs and outputs in "
      "their dtypes, keep-io=false lets float32 inputs and outputs become the target dtype (the model's "
      "signature changes; counter io-changed); fp16 range: a weight with |w| > 65504 keeps its op in fp32 "
      "(declined, counter out-of-range) unless clamp=true (clamped to the fp16 range, counter clamped); "
      "fp32-ops= / lowp-ops= move operators between classes for one run ('softmax;gelu'); emulate=true computes "
      "in fp32 but rounds through the target dtype at every cast point, every low-precision op's result and "
      "every converted weight (stored as fp32): the numerics of fp16 storage on a CPU without fp16 kernels; "
      "min-channels (below); keep-fp32= names ops (their results, ';'-separated) that stay fp32 whatever their "
      "class (--tune fills it with the ops that measured no faster in low precision, casts included). Does not "
      "fire on graphs without fp32 values. "
      "bf16 for a CPU target: an op this LibTorch has no CPU kernel for in bf16 (transposed convs in 1.13, "
      "probed once) stays fp32, declined; so do convs (ir::ConvOp, groups read by name) whose input and output "
      "channels are all below min-channels (default 17 there: measured, a stack of 8-channel convs ran 1.34x "
      "slower in bf16), and silu runs in fp32 where this CPU's bf16 silu is slower than fp32 silu with its two casts (timed once: "
      "LibTorch 1.13's is, 2.15's is not; lowp-ops=silu overrides). "
      "Counters: lowered (ops in low precision), casts (cast nodes in the result), weights (constants "
      "converted), literals (dtype literals rewritten), fp32 (listed fp32 ops that kept full precision), "
      "out-of-range, clamped, io-changed, split.";

  std::string name() const override { return "cast"; }
  std::string description() const override {
    return "run conv/linear/matmul in fp16 or bf16, casts only at precision boundaries";
  }
  std::string contract() const override { return kContract; }
  std::vector<rewriters::OptionSpec> optionSpecs() const override;
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
  // lowersPrecision; the precision of precisionFor(ctx) and its note;
  // emulate= emulates it; keep-io=false may change the signature.
  rewriters::PassEffects effects(const rewriters::PassContext& ctx) const override;

  // The dtype this cast lowers to on ctx's target, as run() decides it
  // (dtype=auto: the target's capabilities, target/capabilities.h; nullopt
  // when auto keeps fp32), and for dtype=auto why.
  struct Precision {
    std::optional<c10::ScalarType> dtype;
    std::string autoNote;  // "" unless dtype=auto
    std::string autoWhy;   // dtype=auto: why the target gets this precision
  };
  Precision precisionFor(const rewriters::PassContext& ctx) const;
};

// The dtype `cast{dtype=...}` means on a target: bf16 on CPU, fp16 on CUDA
// unless `preferBf16`; explicit `bf16` / `fp16` as given.
c10::ScalarType resolveCastDtype(const std::string& dtypeOption, const std::string& targetDevice,
                                 bool preferBf16);

// The op-precision table the cast pass works with when lowering to `target`
// on `targetDevice`: the defaults, plus the exceptions of the CPU kernels
// (with bf16 on a CPU target and emulate=false, silu stays fp32 where this
// CPU's bf16 silu is slower than fp32 with its casts: target::cpuLowPrecisionSiluPays).
PrecisionPolicy castPolicy(c10::ScalarType target, const std::string& targetDevice, bool emulate);

// The largest finite fp16 value.
constexpr double kFp16Max = 65504.0;

}  // namespace ptopt::quant
