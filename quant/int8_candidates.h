// int8 candidates: which ops of a graph the quantize pass may make int8.
//
// Contract. findInt8Candidates lists the quantizable ops of the top-level
// block in program order (the conditions are QuantizePass::kContract's:
// convs and linears with constant float weights, adds of equal known shapes
// with alpha 1, cats of a list built for them alone, muls of two float
// tensors of known shapes of one rank (a squeeze-excite gate: quantized::mul
// broadcasts), LSTM/GRU per
// quant/quantize_rnn.h; in dynamic mode linears, LSTMs and GRUs only), each
// with the relu / relu6 its int8 kernel fuses, and declines the others with a
// reason on `ctx` (null: silently, for a copy being evaluated). It only reads
// the graph.
#pragma once

#include "ir/ir.h"
#include "rewriters/pass.h"

#include <string>
#include <vector>

namespace ptopt::quant {

enum class Int8Kind { Conv, Linear, Add, Cat, Mul, LinearDynamic, Rnn };

// Ops that compute (worth quantizing on their own); adds, cats and muls only join regions.
inline bool isCompute(Int8Kind k) { return k == Int8Kind::Conv || k == Int8Kind::Linear || k == Int8Kind::LinearDynamic || k == Int8Kind::Rnn; }

struct Int8Candidate {
  Int8Kind kind;
  ir::Node* op = nullptr;
  ir::Node* act = nullptr;  // fused relu / hardtanh (its output is `out`)
  ir::Value* out = nullptr;
  std::string label, kindName;
};

// Whether `n` is the one user of `v` (and `v` has one).
bool isOnlyUser(const ir::Value* v, const ir::Node* n);

// The quantizable ops of `g`'s top-level block, in program order.
std::vector<Int8Candidate> findInt8Candidates(ir::Graph& g, bool dynamic, rewriters::PassContext* ctx,
                                          const std::string& pass);

// The tensors an add or mul (self, other) or a cat (its list's elements) reads.
std::vector<ir::Value*> addOrCatInputs(ir::Node* n);
// The float tensors a candidate reads (its quantization entries).
std::vector<ir::Value*> tensorInputs(const Int8Candidate& c);

}  // namespace ptopt::quant
