// Candidates for the tuner (tune/tuner.h): one op run alone on its real
// shapes (micro-benchmarks, cached by op signature like cuDNN's benchmark
// mode, so they transfer across models), and whole models.
//
// Contract. Each builder returns the candidates of one decision, the
// baseline first (what the graph does without the rewrite), or nullopt with
// `why` when the node does not qualify or its shapes are unknown. The
// candidates compute the same values (up to rounding; precision candidates
// within the low-precision criterion) on the same inputs
// (tune/signature.h: benchArguments), each call a fresh result:
//   convKernel      conv2d  vs  mkldnn_convolution (tuned-kernels' rewrite);
//   convPrepack     the conv as it is  vs  mkldnn_prepacked::conv2d_run with
//                   the weight packed once (tuned-kernels' prepacked=);
//   linearPrepack   aten::linear  vs  the same as a prepacked 1x1 conv;
//   convPrecision   an op the precision table runs in low precision (conv,
//                   linear), in fp32  vs  in `low` with its casts: the input
//                   converted before and the result converted back after
//                   (an upper bound: between two lowered ops the casts cancel);
//   bnAffine        batch_norm  vs  addcmul(shift, x, scale) (bn-to-affine);
//   wholeModel      the exported module of each model variant on the example
//                   inputs (channels-last per model; fuse-cudnn's cuDNN
//                   conv+add+relu on CUDA).
#pragma once

#include "ir/ir.h"
#include "ir/model.h"
#include "tune/tuner.h"

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ptopt::tune {

std::optional<std::vector<Candidate>> convKernelCandidates(const ir::Node& conv, c10::Device device, std::string& why);
// The conv as it is (conv2d or mkldnn_convolution)  vs  conv2d_run with its
// weight packed beforehand (tuned-kernels' prepacked=; the pack is not timed).
std::optional<std::vector<Candidate>> convPrepackCandidates(const ir::Node& conv, c10::Device device, std::string& why);
// aten::linear as it is  vs  as tuned-kernels' prepacked= writes it: the
// input viewed as a 4-D channels-last tensor, a prepacked 1x1 conv, the
// result viewed back (the pack is not timed).
std::optional<std::vector<Candidate>> linearPrepackCandidates(const ir::Node& linear, c10::Device device,
                                                              std::string& why);
// Where an op sits in the preset's precision assignment (every op that can
// runs in low precision): which of its arguments arrive in low precision,
// and whether every reader of its result takes it in low precision. Each
// candidate pays the casts its choice needs there and no others: fp32 next
// to low-precision neighbours casts in and out, low precision next to fp32
// ones (graph inputs and outputs, ops kept in fp32) does.
struct PrecisionNeighbours {
  std::set<size_t> lowInputs;  // argument indices
  bool lowOutput = false;
  std::string text() const;    // for the decision's signature: "in 0 out low"
};
std::optional<std::vector<Candidate>> convPrecisionCandidates(const ir::Node& op, c10::ScalarType low,
                                                              const PrecisionNeighbours& neighbours,
                                                              c10::Device device, std::string& why);
std::optional<std::vector<Candidate>> bnAffineCandidates(const ir::Node& bn, c10::Device device, std::string& why);

// One candidate per (name, model): each exported (ir::exportModel), moved to
// `device` and called on `inputs`.
std::vector<Candidate> wholeModelCandidates(const std::vector<std::pair<std::string, const ir::Model*>>& models,
                                            const std::vector<c10::IValue>& inputs, c10::Device device);

}  // namespace ptopt::tune
