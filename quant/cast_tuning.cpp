#include "quant/cast_tuning.h"

#include "ir/literal.h"
#include "quant/cast.h"
#include "quant/precision_policy.h"
#include "rewriters/constants.h"
#include "rewriters/name_list.h"
#include "tune/signature.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <fmt/format.h>
#include <torch/script.h>

#include <algorithm>
#include <memory>
#include <set>

namespace ptopt::quant {

namespace {

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

std::string PrecisionNeighbours::text() const {
  std::string s = "in";
  if (lowInputs.empty()) s += " -";
  for (size_t i : lowInputs) s += " " + std::to_string(i);
  return s + (lowOutput ? " out low" : " out fp32");
}

std::optional<std::vector<tune::Candidate>> convPrecisionCandidates(const ir::Node& op, c10::ScalarType low,
                                                              const PrecisionNeighbours& neighbours,
                                                              c10::Device device, std::string& why) {
  if (op.numOutputs() != 1 || !op.output()->isTensor()) {
    why = "not one tensor result";
    return std::nullopt;
  }
  auto args = tune::benchArguments(op, device, why);
  if (!args) return std::nullopt;
  // Constants are converted once (the cast pass converts weights offline);
  // an activation arrives in the precision of its producer and is cast on
  // every call when the op wants the other one; the result likewise.
  std::vector<c10::IValue> fp32Args = *args, lowArgs = *args;
  std::vector<size_t> activations;
  bool anyFloat = false;
  for (size_t i = 0; i < op.numArgs(); ++i) {
    if (!lowArgs[i].isTensor() || lowArgs[i].toTensor().scalar_type() != at::kFloat) continue;
    anyFloat = true;
    const ir::Value* v = op.arg(i).value();
    const bool constant = v && rewriters::constantTensor(v);
    if (constant) lowArgs[i] = lowArgs[i].toTensor().to(low);
    else activations.push_back(i);
    if (!constant && neighbours.lowInputs.count(i)) fp32Args[i] = lowArgs[i] = fp32Args[i].toTensor().to(low);
  }
  if (!anyFloat) {
    why = "no float32 tensor argument";
    return std::nullopt;
  }
  auto handle = std::make_shared<c10::OperatorHandle>(
      c10::Dispatcher::singleton().findSchemaOrThrow(op.target().c_str(), op.overload().c_str()));
  // One call in `dtype`: activations not already in it are cast first, and
  // the result is cast when its readers want `outDtype`.
  auto call = [handle, activations](std::shared_ptr<std::vector<c10::IValue>> fixed, c10::ScalarType dtype,
                                    c10::ScalarType outDtype) {
    return [handle, activations, fixed, dtype, outDtype] {
      torch::jit::Stack stack(fixed->begin(), fixed->end());
      for (size_t i : activations)
        if (stack[i].toTensor().scalar_type() != dtype) stack[i] = stack[i].toTensor().to(dtype);
      handle->callBoxed(&stack);
      if (outDtype != dtype) (void)stack.at(0).toTensor().to(outDtype);
    };
  };
  const c10::ScalarType readers = neighbours.lowOutput ? low : at::kFloat;
  return std::vector<tune::Candidate>{
      {"fp32", call(std::make_shared<std::vector<c10::IValue>>(std::move(fp32Args)), at::kFloat, readers)},
      {ir::dtypeName(low), call(std::make_shared<std::vector<c10::IValue>>(std::move(lowArgs)), low, readers)}};
}

bool passesPrecisionOn(OpPrecision p) {
  return p == OpPrecision::Follow || p == OpPrecision::Promote;
}

bool arrivesLow(const ir::Value* v, const PrecisionPolicy& policy, int depth) {
  const ir::Node* n = v->node();
  if (!n || !n->isCall() || depth > 16) return false;  // graph inputs and constants' reads are float32
  const OpPrecision p = policy.classify(*n);
  if (p == OpPrecision::LowPrecision) return true;
  if (!passesPrecisionOn(p)) return false;
  for (size_t i = 0; i < n->numArgs(); ++i)
    if (const ir::Value* in = n->arg(i).value(); in && in->isTensor() && arrivesLow(in, policy, depth + 1)) return true;
  return false;
}

bool readInLow(const ir::Value* v, const PrecisionPolicy& policy, int depth) {
  if (v->uses().empty() || depth > 16) return false;
  for (const ir::Use& u : v->uses()) {
    const ir::Node* user = u.user;
    if (!user->isCall() || !user->blocks().empty()) return false;  // graph outputs stay float32
    const OpPrecision p = policy.classify(*user);
    if (p == OpPrecision::LowPrecision || p == OpPrecision::Neutral) continue;
    if (!passesPrecisionOn(p) || user->numOutputs() != 1 || !readInLow(user->output(), policy, depth + 1)) return false;
  }
  return true;
}


// The op's neighbours in the preset's assignment, where every op the
// policy lowers runs in low precision and ops that follow or promote their
// inputs (relu, pooling, add) take the precision those arrive in.
PrecisionNeighbours neighbours(const ir::Node& op, const PrecisionPolicy& policy) {
  PrecisionNeighbours out;
  for (size_t i = 0; i < op.numArgs(); ++i)
    if (const ir::Value* v = op.arg(i).value(); v && v->isTensor() && arrivesLow(v, policy, 0)) out.lowInputs.insert(i);
  out.lowOutput = readInLow(op.output(), policy, 0);
  return out;
}

void tuneCast(tune::TuningSession& s, const rewriters::PipelineElement& e) {
  const std::string dtypeOpt = e.stringOption("dtype");
  const bool emulate = e.boolOption("emulate");
  const c10::ScalarType low =
      resolveCastDtype(dtypeOpt, s.context().targetDevice, e.boolOption("prefer-bf16") || s.context().preferBf16);
  if (emulate || (low == c10::ScalarType::Half && !s.device().is_cuda()) || !e.stringOption("keep-fp32").empty()) {
    s.skipped("precision", "model", "as given",
            emulate ? "emulate=true: nothing to time" : "fp16 cannot run on this CPU: kept as given");
    return s.keep(e);
  }
  const PrecisionPolicy policy = castPolicy(low, s.context().targetDevice, emulate);
  std::vector<ir::Node*> ops;
  std::set<std::string> keepFp32;
  s.model().forward().walk([&](ir::Node* n) {
    if (n->numOutputs() == 0 || policy.classify(*n) != OpPrecision::LowPrecision) return;
    // Only top-level single-result ops are measured; the others stay fp32.
    if (n->owningBlock() == s.model().forward().block() && n->numOutputs() == 1) ops.push_back(n);
    else keepFp32.insert(n->output(0)->name());
  });
  // Each op's decision: low precision where it measured faster; fp32 where
  // low precision measured slower beyond noise; else a tie (`ties`), fp32 as
  // the baseline. Ops not measured (no signature, a kernel this machine
  // lacks, the budget spent) stay fp32 in every assignment.
  size_t lowered = 0;
  std::set<std::string> ties;
  const double margin = tune::TuneLimits{}.margin;
  for (ir::Node* n : ops) {
    const std::string name = n->output()->name();
    const PrecisionNeighbours where = neighbours(*n, policy);
    const std::vector<std::string> names{"fp32", ir::dtypeName(low)};
    const tune::DecisionRecord d = s.decideOpRecord(
        "precision", *n, names,
        [&](std::string& why) { return convPrecisionCandidates(*n, low, where, s.device(), why); }, where.text());
    if (d.choice != names.front()) {
      ++lowered;
      continue;
    }
    keepFp32.insert(name);
    const bool measured = d.source != tune::DecisionRecord::Source::Skipped;
    if (measured && d.challenger == names[1] && d.low <= 1 + margin) ties.insert(name);
  }
  auto element = [&](const std::set<std::string>& fp32) -> std::optional<rewriters::PipelineElement> {
    if (std::all_of(ops.begin(), ops.end(), [&](const ir::Node* n) { return fp32.count(n->output()->name()) > 0; }))
      return std::nullopt;  // nothing lowered: no cast
    rewriters::PipelineElement tuned = e;
    tuned.setOption("dtype", low == c10::ScalarType::Half ? "fp16" : "bf16");
    tuned.setOption("min-channels", "0");
    if (!fp32.empty()) tuned.setOption("keep-fp32", rewriters::joinNameList(fp32));
    return tuned;
  };
  // none: no op measured faster, the cast is dropped
  const std::optional<rewriters::PipelineElement> tuned = lowered > 0 ? element(keepFp32) : std::nullopt;
  // The ties decide nothing on their own: fp32 beside low-precision
  // neighbours pays casts that low precision beside them does not (and the
  // other way round), which one op's timing cannot see. So the whole-model
  // check also times the assignment with the ties in low precision, fp32
  // only where low precision was slower beyond noise (GhostNet: its
  // depthwise convs measure even, and fp32 there cast between bf16 1x1
  // convs).
  std::vector<tune::TuningSession::NamedElement> alternatives{{"op-by-op", tuned}};
  if (!ties.empty()) {
    std::set<std::string> fp32;
    for (const std::string& name : keepFp32)
      if (!ties.count(name)) fp32.insert(name);
    alternatives.push_back({"op-by-op, ties " + ir::dtypeName(low), element(fp32)});
  }
  const size_t kept = s.preferAmong("precision", e, alternatives);
  if (kept == 0) return s.keep(e);
  if (const auto& chosen = alternatives[kept - 1].second) return s.keep(*chosen);
  s.say(fmt::format("tune: no op measured faster in {}: cast is dropped, the model stays fp32", ir::dtypeName(low)));
}

}  // namespace

tune::Tunable castTunable() {
  tune::Tunable t = tune::elementTunable("precision", "cast", tuneCast, tune::Listing::None);
  t.expectedDecisions = tune::convsAndLinears;
  return t;
}

}  // namespace ptopt::quant
