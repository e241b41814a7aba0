#include "fusion/bn_to_affine_tuning.h"

#include "ir/op_views.h"
#include "rewriters/constants.h"
#include "rewriters/name_list.h"
#include "tune/signature.h"

#include <ATen/ATen.h>

#include <set>

namespace ptopt::fusion {

namespace {

// batch_norm  vs  addcmul(shift, x, scale), as the pass writes it.
std::optional<std::vector<tune::Candidate>> bnAffineCandidates(const ir::Node& node, c10::Device device,
                                                               std::string& why) {
  const auto bn = ir::BatchNormOp::match(&node);
  if (!bn) {
    why = "not a batch_norm";
    return std::nullopt;
  }
  if (bn->training().value_or(true)) {
    why = "the batch_norm is not in inference mode";
    return std::nullopt;
  }
  const auto mean = rewriters::constantTensor(bn->runningMean());
  const auto var = rewriters::constantTensor(bn->runningVar());
  if (!mean || !var || !bn->eps()) {
    why = "its statistics or eps are not constants";
    return std::nullopt;
  }
  const ir::TensorMeta& m = bn->input()->meta();
  if (!m.shape || m.shape->size() < 2) {
    why = "the input rank is unknown (run shape-prop with --input-shape)";
    return std::nullopt;
  }
  auto args = tune::benchArguments(node, device, why);
  if (!args) return std::nullopt;
  at::Tensor scale = (var->to(at::kDouble) + *bn->eps()).rsqrt();
  if (bn->weight()) {
    auto g = rewriters::constantTensor(bn->weight());
    if (!g) { why = "its weight is not a constant"; return std::nullopt; }
    scale = scale * g->to(at::kDouble);
  }
  at::Tensor shift = -mean->to(at::kDouble) * scale;
  if (bn->bias()) {
    auto b = rewriters::constantTensor(bn->bias());
    if (!b) { why = "its bias is not a constant"; return std::nullopt; }
    shift = shift + b->to(at::kDouble);
  }
  std::vector<int64_t> shape(m.shape->size() - 1, 1);
  shape[0] = mean->numel();
  const auto dtype = mean->scalar_type();
  const c10::IValue x = (*args)[bn->index("input")];
  std::vector<c10::IValue> affine{shift.reshape(shape).to(dtype).to(device), x, scale.reshape(shape).to(dtype).to(device),
                                  c10::IValue(int64_t{1})};
  return std::vector<tune::Candidate>{tune::boxedCandidate("batch_norm", "aten::batch_norm", "", *args),
                                      tune::boxedCandidate("addcmul", "aten::addcmul", "", std::move(affine))};
}

void tuneBnToAffine(tune::TuningSession& s, const rewriters::PipelineElement& e) {
  if (e.boolOption("force") || !e.stringOption("nodes").empty()) return s.keep(e);
  const ir::Graph& g = s.model().forward();
  std::vector<ir::Node*> bns;
  g.walk([&](ir::Node* n) {
    if (n->is("aten::batch_norm") && n->owningBlock() == g.block()) bns.push_back(n);
  });
  std::set<std::string> convert;
  for (ir::Node* n : bns) {
    const bool converted = s.decideOp("bn-to-affine", *n, {"batch_norm", "addcmul"}, [&](std::string& why) {
      return bnAffineCandidates(*n, s.device(), why);
    });
    if (converted) convert.insert(n->output()->name());
  }
  rewriters::PipelineElement tuned = e;
  if (!convert.empty()) tuned.setOption("nodes", rewriters::joinNameList(convert));
  s.keep(tuned);
}

}  // namespace

tune::Tunable bnToAffineTunable() {
  return tune::elementTunable("bn-to-affine", "bn-to-affine", tuneBnToAffine);
}

}  // namespace ptopt::fusion
