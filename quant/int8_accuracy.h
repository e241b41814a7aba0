// int8 accuracy: how far an int8 build of a graph is from the graph.
//
// Contract. evaluateInt8 quantizes a copy of `g` (buildInt8 with the
// candidates in `fp32` kept float) and runs both through the IR interpreter
// on `batches`: the worst cosine over every float output (flattened out of
// tuples and lists), the top-1 agreement of 2-D outputs, and per candidate
// the SQNR (dB) of its output and the worst SQNR of its inputs (a float input
// counts its own quantize_per_tensor). `g` is not changed. A build that fails
// to run gives cosine -1 and the error.
#pragma once

#include "quant/int8_candidates.h"
#include "quant/observers.h"
#include "quant/quantize_rnn.h"

#include <ATen/core/ivalue.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ptopt::quant {

struct Evaluation {
  double cosine = 1;
  std::optional<double> top1;
  std::map<size_t, double> sqnr;     // candidate -> output SQNR
  std::map<size_t, double> inSqnr;   // candidate -> worst input SQNR
  std::set<size_t> quantized;        // candidates the build made int8
  std::string error;
};

Evaluation evaluateInt8(const ir::Graph& g, const std::set<size_t>& fp32,
                        const std::map<std::string, QParams>& qparams,
                        const std::vector<std::vector<c10::IValue>>& batches, bool dynamic, bool reduceRange,
                        RnnWeights rnnWeights);

}  // namespace ptopt::quant
