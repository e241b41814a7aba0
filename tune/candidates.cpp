#include "tune/candidates.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "rewriters/constants.h"
#include "tune/signature.h"
#include "tune/tuned_kernels.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/script.h>

#include <memory>

namespace ptopt::tune {

namespace {

// An ATen operator resolved once and called boxed with fixed arguments: the
// same on LibTorch 1.13 and 2.x, whatever the C++ signature.
Candidate boxed(std::string name, const std::string& op, const std::string& overload, std::vector<c10::IValue> args) {
  auto handle = std::make_shared<c10::OperatorHandle>(c10::Dispatcher::singleton().findSchemaOrThrow(op.c_str(), overload.c_str()));
  auto fixed = std::make_shared<std::vector<c10::IValue>>(std::move(args));
  return {std::move(name), [handle, fixed] {
            torch::jit::Stack stack(fixed->begin(), fixed->end());
            handle->callBoxed(&stack);
          }};
}

std::string qualified(const ir::Node& n) { return n.target(); }

// The benchmark arguments of a conv or linear that tuned-kernels can pack
// (`ineligible`: its own reason not to, or ""), or nullopt with `why`.
std::optional<std::vector<c10::IValue>> prepackArguments(const ir::Node& n, c10::Device device,
                                                         const std::string& ineligible, std::string& why) {
  if (!device.is_cpu()) {
    why = "oneDNN convs are CPU kernels";
    return std::nullopt;
  }
  if (!hasPrepackedConvs()) {
    why = "this LibTorch has no mkldnn_prepacked::conv2d_prepack";
    return std::nullopt;
  }
  why = ineligible;
  if (!why.empty()) return std::nullopt;
  return benchArguments(n, device, why);
}

}  // namespace

std::optional<std::vector<Candidate>> convKernelCandidates(const ir::Node& conv, c10::Device device, std::string& why) {
  if (!device.is_cpu()) {
    why = "oneDNN convs are CPU kernels";
    return std::nullopt;
  }
  why = mkldnnIneligible(conv);
  if (!why.empty()) return std::nullopt;
  auto args = benchArguments(conv, device, why);
  if (!args) return std::nullopt;
  std::vector<c10::IValue> mk;  // the same values in mkldnn_convolution's order
  for (size_t i : ir::Conv2dKernelOp::match(&conv)->mkldnnConvolutionOrder()) mk.push_back((*args)[i]);
  return std::vector<Candidate>{boxed("conv2d", "aten::conv2d", "", *args),
                                boxed("mkldnn", "aten::mkldnn_convolution", "", std::move(mk))};
}

std::optional<std::vector<Candidate>> convPrepackCandidates(const ir::Node& conv, c10::Device device, std::string& why) {
  auto args = prepackArguments(conv, device, prepackIneligible(conv), why);
  if (!args) return std::nullopt;
  const auto& a = *args;
  const auto view = ir::Conv2dKernelOp::match(&conv);  // conv2d or mkldnn_convolution (prepackIneligible checked)
  const c10::IValue& input = a[view->inputIndex()];
  // The pack is made once, as the file's load makes it; only the run is timed.
  torch::jit::Stack pack;
  for (size_t i : view->prepackOrder()) pack.push_back(a[i]);
  pack.emplace_back(input.toTensor().sizes().vec());
  pack.emplace_back(std::string("none"));
  c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn_prepacked::conv2d_prepack", "").callBoxed(&pack);
  return std::vector<Candidate>{boxed("dense", qualified(conv), "", a),
                                boxed("prepacked", "mkldnn_prepacked::conv2d_run", "", {input, pack.at(0)})};
}

std::optional<std::vector<Candidate>> linearPrepackCandidates(const ir::Node& linear, c10::Device device,
                                                              std::string& why) {
  auto args = prepackArguments(linear, device, linearPrepackIneligible(linear), why);
  if (!args) return std::nullopt;
  const auto& a = *args;
  // As tuned-kernels writes it: the input viewed as a 4-D channels-last
  // tensor, the weight as [O, C, 1, 1], packed once (not timed).
  const at::Tensor x = a[0].toTensor(), w = a[1].toTensor();
  const std::vector<LinearView> in = linearInputViews(x.dim()), out = linearOutputViews(x.dim());
  torch::jit::Stack pack{c10::IValue(w.reshape({w.size(0), w.size(1), 1, 1}).contiguous()), a[2],
                         c10::IValue(std::vector<int64_t>{1, 1}), c10::IValue(std::vector<int64_t>{0, 0}),
                         c10::IValue(std::vector<int64_t>{1, 1}), c10::IValue(int64_t{1}),
                         c10::IValue(applyViews(x, in).sizes().vec()), c10::IValue(std::string("none"))};
  c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn_prepacked::conv2d_prepack", "").callBoxed(&pack);
  auto run = std::make_shared<c10::OperatorHandle>(
      c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn_prepacked::conv2d_run", ""));
  const c10::IValue context = pack.at(0);
  Candidate packed{"prepacked", [run, x, context, in, out] {
                     torch::jit::Stack stack{c10::IValue(applyViews(x, in)), context};
                     run->callBoxed(&stack);
                     stack.at(0) = applyViews(stack.at(0).toTensor(), out);
                   }};
  return std::vector<Candidate>{boxed("dense", "aten::linear", "", a), std::move(packed)};
}

std::string PrecisionNeighbours::text() const {
  std::string s = "in";
  if (lowInputs.empty()) s += " -";
  for (size_t i : lowInputs) s += " " + std::to_string(i);
  return s + (lowOutput ? " out low" : " out fp32");
}

std::optional<std::vector<Candidate>> convPrecisionCandidates(const ir::Node& op, c10::ScalarType low,
                                                              const PrecisionNeighbours& neighbours,
                                                              c10::Device device, std::string& why) {
  if (op.numOutputs() != 1 || !op.output()->isTensor()) {
    why = "not one tensor result";
    return std::nullopt;
  }
  auto args = benchArguments(op, device, why);
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
      c10::Dispatcher::singleton().findSchemaOrThrow(qualified(op).c_str(), op.overload().c_str()));
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
  return std::vector<Candidate>{
      {"fp32", call(std::make_shared<std::vector<c10::IValue>>(std::move(fp32Args)), at::kFloat, readers)},
      {ir::dtypeName(low), call(std::make_shared<std::vector<c10::IValue>>(std::move(lowArgs)), low, readers)}};
}

std::optional<std::vector<Candidate>> bnAffineCandidates(const ir::Node& node, c10::Device device, std::string& why) {
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
  auto args = benchArguments(node, device, why);
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
  return std::vector<Candidate>{boxed("batch_norm", "aten::batch_norm", "", *args),
                                boxed("addcmul", "aten::addcmul", "", std::move(affine))};
}

std::vector<Candidate> wholeModelCandidates(const std::vector<std::pair<std::string, const ir::Model*>>& models,
                                            const std::vector<c10::IValue>& inputs, c10::Device device) {
  std::vector<c10::IValue> onDevice;
  for (const c10::IValue& v : inputs) onDevice.push_back(v.isTensor() ? c10::IValue(v.toTensor().to(device)) : v);
  auto shared = std::make_shared<std::vector<c10::IValue>>(std::move(onDevice));
  std::vector<Candidate> out;
  for (const auto& [name, model] : models) {
    auto module = std::make_shared<torch::jit::Module>(ir::exportModel(*model));
    module->eval();
    if (!device.is_cpu()) module->to(device);
    out.push_back({name, [module, shared] { (void)module->forward(*shared); }});
  }
  return out;
}

}  // namespace ptopt::tune
