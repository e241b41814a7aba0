// Load-time values: results of pure functions of constants that a TorchScript
// file cannot store, computed when the model loads instead of on every call.
//
// Contract. A node is a load-time node when it calls an operator of the
// load-time table (aten::to_mkldnn, aten::mkldnn_reorder_conv2d_weight: their
// results are oneDNN tensors, which torch.jit.save refuses;
// mkldnn_prepacked::conv2d_prepack: its packed-conv object does not load back
// in LibTorch 1.13, "Fusion behavior undefined"; prepacked::conv2d_clamp_prepack:
// XNNPACK's context, stored as its dense weight like the others;
// mkldnn::_reorder_linear_weight: oneDNN's packed linear weight;
// onednn::qconv_prepack, onednn::qlinear_prepack: oneDNN's packed int8 conv
// and linear weights) in the top-level
// block of a method, and each of its value arguments is a tensor constant
// (a get_attr) or the result of another load-time node; its other arguments
// are literals TorchScript source can spell (ints, int lists, floats, bools,
// None, identifier strings). hoistLoadTimeValues(model) moves every such chain out of the
// model's graphs: each result that an ordinary node reads becomes a read of
// `ptopt_load_time.v<i>`, and the chain becomes TorchScript source for a
// holder submodule (class __torch__.ptopt.LoadTimeValues):
//   __getstate__  returns the dense constants the chains read (s0, s1, ...)
//                 and `training`: what the file stores;
//   __setstate__  stores them back and recomputes v0, v1, ... from them.
// torch.jit.save pickles an object with __getstate__ by what it returns, and
// torch.jit.load calls __setstate__ (the way quantized packed parameters
// travel), so the file holds ordinary dense tensors and loads in stock
// PyTorch; the values are computed once per load, before any call, so
// concurrent calls never race on them. attachLoadTimeValues registers the
// holder on the exported root with the values computed now (an in-memory
// export runs without a save). Nodes that do not qualify stay where they
// are and run on every call.
#pragma once

#include "ir/model.h"

#include <torch/csrc/jit/api/module.h>

#include <set>
#include <string>
#include <vector>

namespace ptopt::ir {

inline constexpr const char* kLoadTimeModule = "ptopt_load_time";

// An operator whose result only a load can make (see above), by node or by
// its qualified name (the import rebuilds the chains of these only).
bool isLoadTimeOperator(const Node& n);
bool isLoadTimeOperatorName(const std::string& qualified);

struct LoadTimeValues {
  std::vector<at::Tensor> state;    // s0, s1, ...: the dense constants the chains read
  std::vector<c10::IValue> values;  // v0, v1, ...: their results, computed now
  std::string source;               // __getstate__ and __setstate__
  std::set<std::string> namespaces; // operator namespaces besides aten the source calls
  bool empty() const { return values.empty(); }
};

// Whether `model` has load-time nodes to hoist.
bool hasLoadTimeNodes(const Model& model);
// Moves them out of `model`'s graphs (see above).
LoadTimeValues hoistLoadTimeValues(Model& model);
// The holder submodule on `root`, attribute kLoadTimeModule.
void attachLoadTimeValues(torch::jit::Module& root, const std::shared_ptr<torch::jit::CompilationUnit>& cu,
                          const LoadTimeValues& values);

// Recomputes the load-time values of `root` (and of every submodule ptopt
// wrote) as a load would now: __setstate__(__getstate__()). oneDNN picks a
// packed weight's blocking for the thread count in effect (brgemm convs split
// the output channels per thread), and a conv handed a pack made for another
// count reorders it on every call, slower than no packing at all. Whoever
// changes the thread count of a loaded module and then runs it calls this.
// Returns whether there was anything to recompute.
bool repackLoadTimeValues(torch::jit::Module& root);

}  // namespace ptopt::ir
