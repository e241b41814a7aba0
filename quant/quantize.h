// quantize: int8 post-training quantization of the graph (static or dynamic).
// The contract is kContract below (`ptopt passes quantize` prints it).
#pragma once

#include "quant/quantize_report.h"
#include "rewriters/pass.h"
#include "rewriters/pipeline.h"

#include <limits>
#include <string>
#include <vector>

namespace ptopt::quant {

class QuantizePass : public rewriters::Pass {
 public:
  static constexpr const char* kContract =
      "Static mode (the default) quantizes the top-level block of the graph for the LibTorch quantized engine in "
      "use (onednn on Debian's 1.13; activations use reduce_range on fbgemm/x86 and on onednn without VNNI, "
      "quant/int8_engine.h): aten::conv2d and aten::conv1d (not transposed, constant "
      "float weight, literal stride/padding/dilation/groups, read through ir::ConvOp) becomes quantized::conv2d (conv1d: quantized::conv1d), "
      "or quantized::conv2d_relu (conv1d_relu) when its only user is relu/relu_ or hardtanh(0, v)/relu6 (the fused op's output "
      "parameters are observed on the activation's output, whose range ends at or below v, so the clip is implied "
      "and the hardtanh is dropped); aten::linear with a constant weight becomes "
      "quantized::linear / linear_relu; aten::add / add_ / _add_relu / _add_relu_ of two float tensors of equal "
      "known shape with alpha 1 becomes quantized::add / add_relu; aten::cat of a list used only by it becomes "
      "quantized::cat (an input that a static int8 candidate writes and no other cat reads is written in the cat's own output parameters, so the cat copies bytes instead of requantizing it (counter cat-shared; where that alone misses the accuracy criterion and the inputs' own parameters meet it, they keep their own and the pass says so)); aten::mul.Tensor of two float tensors of known shapes of one rank (a squeeze-excite gate; "
      "it broadcasts) becomes quantized::mul; an add or cat is made int8 only when one of its inputs is int8 already, "
      "a mul only when both are (alone they would only add conversions), and the pass declines when no conv, linear, LSTM or GRU can be quantized. Weights are per-channel symmetric qint8 (scale max|w_c|/127.5), packed once by the "
      "engine's prepack ops into module attributes (Conv2dPackedParamsBase / LinearPackedParamsBase), which "
      "TorchScript serializes, so the file loads and runs in stock PyTorch; the float bias stays in the packed "
      "params; convs or linears of one module called at several places (same weight and bias constants, same "
      "geometry) read one packed attribute (counter packed-shared). Activations are per-tensor affine quint8 with parameters from observers filled by running the "
      "calibration set through the IR interpreter (observer=minmax|histogram|percentile). "
      "aten::quantize_per_tensor is inserted where a float value enters an int8 op (once per value); relu, "
      "hardtanh, max_pool2d, avg_pool2d, adaptive_avg_pool2d, flatten, reshape, contiguous, mean over dims and "
      "hardsigmoid (its kernel's fixed quantization, scale 1/256: [0, 255/256]) of a quantized value run on the quantized tensor; aten::dequantize is inserted before every other user (graph outputs, ops "
      "without int8 kernels, nested blocks). In-place forms are converted only when the value they write has no "
      "other user. The original ops and their fp32 weights are erased. "
      "Accuracy guard: the result is compared with the fp32 graph on held-out batches (the last quarter of the "
      "calibration set, at least one): cosine of every float output and top-1 agreement of 2-D outputs, and the "
      "SQNR (dB) of every quantized op's output against its fp32 value; while the cosine is below min-cosine the "
      "op that loses the most SQNR between its inputs and its output is kept in fp32 (counter fallback; the report "
      "names it with the cosine that forced it and the cosine with it in fp32) and the check is rerun, at most max-fallback times (default: half the convs and linears); when the criterion cannot be met, or no quantized op is left, the graph is left unchanged "
      "(declined). fp32-ops= keeps named ops (their output value names, or operator names such as aten::linear) "
      "in fp32. Dynamic mode (mode=dynamic) turns each aten::linear with a constant weight into "
      "quantized::linear_dynamic (weights int8 per channel, activations quantized per call; no calibration). "
      "LSTM and GRU are dynamic int8 in both modes (LibTorch has no static int8 kernel for them, and dynamic is "
      "what torch.ao's quantize_dynamic gives): an aten::lstm / aten::gru of the top-level block (the input "
      "overload of scripted and traced nn.LSTM/nn.GRU, or the packed-sequence data overload) whose weights are "
      "constants nobody writes (a List[Tensor] constant or a list of tensor constants, no storage shared with a "
      "constant the graph writes), float32, in the layout of a plain LSTM/GRU (no proj_size), with literal "
      "has_biases, num_layers, bidirectional and train=False, becomes aten::quantized_lstm / quantized_gru of the "
      "same overload over one __torch__.torch.classes.rnn.CellParamsBase constant per layer and direction "
      "(quantized::make_quantized_cell_params_dynamic of two quantized::linear_prepack packed weights, symmetric "
      "qint8 per rnn-weights: auto = per-tensor like torch.ao (the faster kernel) unless a row of a matrix would use "
      "under 16 levels, then per-channel for it; float biases, zero biases when it has none; the engine's "
      "reduce_range), as torch.ao produces, so the "
      "file loads and runs in stock PyTorch; its sequence output's SQNR is reported and the fallback may keep it "
      "fp32 like any op (quant/quantize_rnn.h). An LSTM/GRU inside control flow, or whose weights are computed or "
      "written, is declined with the reason. "
      "Calibration data: quant::CalibrationData on the context's side data (the CLI's --calibration FILE); without it, seeded random "
      "batches shaped like the example inputs (--input-shape), with a loud warning; without either the pass "
      "declines. Calibration and the accuracy guard run at one intra-op thread (computesFromData): ATen's "
      "reductions round differently at other counts, and the scales written must not depend on the thread count "
      "(the report says the count). Control flow blocks are left in fp32. Does not fire on a graph with no quantizable op. "
      "Counters: quantized, fallback, cat-shared, packed-shared, entries (quantize_per_tensor nodes), exits (dequantize nodes), dynamic, rnn "
      "(LSTM/GRU made int8, also counted in quantized or dynamic).";

  std::string name() const override { return "quantize"; }
  std::string description() const override {
    return "int8 post-training quantization (static with calibration, or dynamic), with an accuracy guard";
  }
  std::string contract() const override { return kContract; }
  std::vector<rewriters::OptionSpec> optionSpecs() const override;
  rewriters::PassResult run(ir::Graph& graph, rewriters::PassContext& ctx) override;
  rewriters::PassEffects effects(const rewriters::PassContext&) const override {
    rewriters::PassEffects e;
    e.computesFromData = true;
    e.lowersPrecision = true;
    e.precision = c10::ScalarType::QInt8;
    return e;
  }
};

// The request's `--quantize DTYPE` (Python's quantize=), the one route
// for both faces: int8 adds quantize{dtype=int8} unless the pipeline
// quantizes already; bf16, fp16 or auto add cast{dtype=DTYPE}, or set the
// dtype of the pipeline's cast when it has one. Extra passes go where
// rewriters::addExtraPasses puts them (after the rewrites and rule files,
// before the device lowering). Throws std::invalid_argument naming the
// dtypes for any other.
inline constexpr const char* kRequestDtypes = "int8, bf16, fp16 or auto";
void addRequestedPrecision(rewriters::Pipeline& pipeline, const std::string& dtype,
                           const rewriters::PassRegistry& registry);
// Whether `dtype` is one addRequestedPrecision takes.
bool isRequestDtype(const std::string& dtype);

}  // namespace ptopt::quant
