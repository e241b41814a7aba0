// int8 in a torch.export program: the quantize pass's ops in PT2E's Q/DQ form.
//
// Contract. The quantize pass (quant/) writes int8 as TorchScript's quantized
// ops: quantized tensors, packed weights (script objects) and quantized::
// kernels. A torch.export program can hold none of them (its schema has no
// quantized dtype, no packed weight, and oneDNN's int8 kernels need a weight
// packed at run time). What a program can hold is the form PyTorch's own
// PT2E quantization writes (torch.ao / torchao `convert_pt2e`), which
// Inductor's x86 int8 lowering compiles into oneDNN int8 kernels:
//   - a quantized activation is a uint8 tensor made by
//     quantized_decomposed::quantize_per_tensor(x, scale, zp, 0, 255, uint8)
//     and read through dequantize_per_tensor with the same parameters;
//   - a weight is an int8 constant with per-channel scales (float32) and
//     zero points (int64) constants, read through dequantize_per_channel
//     (axis 0, -128..127);
//   - each int8 op is its float op between them: quantized::conv2d(_relu) is
//     dq -> aten::conv2d [-> relu] -> q, conv1d and linear likewise, add/add_relu/mul/
//     cat dq each input -> the float op -> q with the op's output parameters;
//   - an op run on a quantized tensor (pooling, relu, reshape, hardsigmoid,
//     ...) is dq -> the op -> q, with the input's parameters (hardsigmoid:
//     the int8 kernel's 1/256, 0);
//   - aten::dequantize becomes dequantize_per_tensor; size queries read the
//     uint8 tensor.
// Numerics: the Q/DQ program computes what the int8 kernels compute up to
// rounding inside an op (float accumulation instead of int32), within the
// int8 criteria verification applies. lowerInt8ForPt2 edits `m` (a copy the
// writer owns) and returns how many int8 ops it wrote; it throws
// std::invalid_argument naming the node for int8 it has no form for (dynamic
// int8 linears and RNN cells, transposed convolutions, per-tensor quantized weights of other
// than int8, quantization parameters that are not constants). Models without
// quantized ops are left alone (hasQuantizedOps says which).
#pragma once

#include "ir/model.h"

#include <string>
#include <vector>

namespace ptopt::ir {

bool hasQuantizedOps(const Graph& g);

int64_t lowerInt8ForPt2(Model& m);

}  // namespace ptopt::ir
