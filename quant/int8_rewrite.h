// int8 rewrite: the quantize pass's graph edits, for a chosen set of
// candidates.
//
// Contract. buildInt8 rewrites `g` (its candidates `cands`, found on it by
// findInt8Candidates) to int8 as QuantizePass::kContract says, keeping the
// candidates in `fp32` in float: packed weights as constants, one
// quantize_per_tensor per float value entering an int8 op, pass-through ops
// on quantized tensors, a dequantize before every float user (those nobody
// reads are erased); LSTM/GRU through buildDynamicRnn. Every edit goes through
// one ir::Rewriter on `log` (null for a copy being evaluated).
#pragma once

#include "ir/rewriter.h"
#include "quant/int8_candidates.h"
#include "quant/observers.h"
#include "quant/quantize_rnn.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace ptopt::quant {

struct BuildResult {
  std::map<size_t, ir::Value*> quantizedOut;       // candidate index -> its quantized output
  std::map<std::string, ir::Value*> quantizedByName;  // original value name -> quantized value
  int64_t entries = 0, exits = 0, quantized = 0, rnn = 0;
  int64_t packedShared = 0;  // convs/linears that read another's packed weight (one module, called twice)
};

BuildResult buildInt8(ir::Graph& g, const std::vector<Int8Candidate>& cands, const std::set<size_t>& fp32,
                      const std::map<std::string, QParams>& qparams, ir::EditLog* log, const std::string& pass,
                      bool reduceRange, RnnWeights rnnWeights);

}  // namespace ptopt::quant
