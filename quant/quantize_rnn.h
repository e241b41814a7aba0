// Dynamic int8 LSTM and GRU for the quantize pass (quant/quantize.h).
//
// aten::lstm / aten::gru (the `input` overload that nn.LSTM / nn.GRU produce
// under torch.jit.script and torch.jit.trace, and the packed-sequence `data`
// overload) become aten::quantized_lstm / aten::quantized_gru of the same
// overload: what torch.ao.quantization.quantize_dynamic produces in LibTorch
// 1.13, so the saved file loads and runs in stock PyTorch. Per cell (layer x
// direction) the weights are quantized to symmetric qint8 (RnnWeights below),
// packed with quantized::linear_prepack (the float bias inside), and joined by
// quantized::make_quantized_cell_params_dynamic into a
// __torch__.torch.classes.rnn.CellParamsBase constant with the engine's
// reduce_range (quant/int8_engine.h). Activations are quantized per call by
// the kernel, so no calibration is needed. An op without biases gets zero
// biases (the quantized kernels require them; the result is the same).
#pragma once

#include "ir/ir.h"

#include <ATen/ATen.h>

#include <string>

namespace ptopt::ir {
class MutationAnalysis;
class Rewriter;
}  // namespace ptopt::ir

namespace ptopt::quant {

// How RNN weight matrices are quantized. PerTensor is torch.ao's default and
// the faster kernel (onednn, 2x512 LSTM, 1 thread: 10.9 ms vs 12.3-13.1 ms
// per-channel); PerChannel keeps rows of very different scale accurate. Auto:
// per-tensor, unless some row (output channel) of a matrix would use fewer
// than 16 of the 127 levels (its max |w| is below an 8th of the matrix's), then
// per-channel for that matrix.
enum class RnnWeights { Auto, PerTensor, PerChannel };
RnnWeights parseRnnWeights(const std::string& s);  // auto, per-tensor, per-channel
// Auto's choice for one weight matrix: some row with a nonzero max |w|
// below an 8th of the matrix's.
bool rnnWeightNeedsPerChannel(const at::Tensor& w);

// aten::lstm or aten::gru (any overload).
bool isRnnOp(const ir::Node* n);

// The sequence the RNN op reads (its `input`, or `data` for a packed sequence).
ir::Value* rnnSequenceInput(const ir::Node* n);

// Why RNN op `n` cannot become dynamic int8, or "" when it can: its weights
// must be constants nobody writes (a List[Tensor] constant, or a
// prim::ListConstruct of tensor constants; checked with `mutation`, which
// must describe n's graph, and against every constant the graph may write
// that shares their storage), float32 matrices in the layout of a plain
// LSTM/GRU (no proj_size), with literal has_biases, num_layers,
// bidirectional and train=False.
std::string rnnDeclineReason(const ir::Node* n, const ir::MutationAnalysis& mutation);

// Replaces RNN op `n` (rnnDeclineReason(n) empty) by its dynamic int8 form:
// cell-params constants named after the weights' module (`lstm.cell_params_l0`,
// `..._l0_reverse`), a prim::ListConstruct of them, and the quantized op,
// whose outputs take over n's uses and names; n and the weights nobody else
// reads are erased. Returns the new first output (the sequence output).
ir::Value* buildDynamicRnn(ir::Rewriter& rw, ir::Node* n, bool reduceRange, RnnWeights weights);

}  // namespace ptopt::quant
