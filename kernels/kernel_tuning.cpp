#include "kernels/kernel_tuning.h"

#include "ir/op_views.h"
#include "kernels/onednn_fused_convs.h"
#include "kernels/tuned_kernels.h"
#include "kernels/xnnpack_convs.h"
#include "rewriters/constants.h"
#include "rewriters/pipeline.h"
#include "rewriters/registry.h"
#include "target/kernel_probes.h"
#include "tune/signature.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/script.h>

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <set>

namespace ptopt::kernels {

namespace {

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
  return tune::benchArguments(n, device, why);
}

// conv2d  vs  mkldnn_convolution (tuned-kernels' mkldnn=).
std::optional<std::vector<tune::Candidate>> convKernelCandidates(const ir::Node& conv, c10::Device device, std::string& why) {
  if (!device.is_cpu()) {
    why = "oneDNN convs are CPU kernels";
    return std::nullopt;
  }
  why = mkldnnIneligible(conv);
  if (!why.empty()) return std::nullopt;
  auto args = tune::benchArguments(conv, device, why);
  if (!args) return std::nullopt;
  std::vector<c10::IValue> mk;  // the same values in mkldnn_convolution's order
  for (size_t i : ir::Conv2dKernelOp::match(&conv)->mkldnnConvolutionOrder()) mk.push_back((*args)[i]);
  return std::vector<tune::Candidate>{tune::boxedCandidate("conv2d", "aten::conv2d", "", *args),
                                tune::boxedCandidate("mkldnn", "aten::mkldnn_convolution", "", std::move(mk))};
}

std::optional<std::vector<tune::Candidate>> convPrepackCandidates(const ir::Node& conv, c10::Device device, std::string& why) {
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
  return std::vector<tune::Candidate>{tune::boxedCandidate("dense", conv.target(), "", a),
                                tune::boxedCandidate("prepacked", "mkldnn_prepacked::conv2d_run", "", {input, pack.at(0)})};
}

std::optional<std::vector<tune::Candidate>> linearPrepackCandidates(const ir::Node& linear, c10::Device device,
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
  tune::Candidate packed{"prepacked", [run, x, context, in, out] {
                     torch::jit::Stack stack{c10::IValue(applyViews(x, in)), context};
                     run->callBoxed(&stack);
                     stack.at(0) = applyViews(stack.at(0).toTensor(), out);
                   }};
  return std::vector<tune::Candidate>{tune::boxedCandidate("dense", "aten::linear", "", a), std::move(packed)};
}

// A candidate that calls `op` boxed on `args` with argument `packedAt` the
// result of `pack`: packed once, untimed, where OUT computes its packs when
// it loads (a TorchScript file); in every timed call where OUT runs them on
// every call (`eachCall`: a .pt2 program, as ep.module() runs it).
tune::Candidate packedCandidate(std::string name, std::function<c10::IValue()> pack, const std::string& op,
                                std::vector<c10::IValue> args, size_t packedAt, bool eachCall) {
  if (!eachCall) {
    args.at(packedAt) = pack();
    return tune::boxedCandidate(std::move(name), op, "", std::move(args));
  }
  auto handle = std::make_shared<c10::OperatorHandle>(c10::Dispatcher::singleton().findSchemaOrThrow(op.c_str(), ""));
  auto fixed = std::make_shared<std::vector<c10::IValue>>(std::move(args));
  return {std::move(name), [handle, fixed, pack = std::move(pack), packedAt] {
            torch::jit::Stack stack(fixed->begin(), fixed->end());
            stack.at(packedAt) = pack();
            handle->callBoxed(&stack);
          }};
}

// The linear as tuned-kernels' fused= writes it: mkldnn::_linear_pointwise
// with its weight packed for the rows it sees (packedCandidate), no post-op.
tune::Candidate fusedLinearCandidate(const ir::Node& linear, c10::Device device, bool packEachCall) {
  std::string why;
  auto args = tune::benchArguments(linear, device, why);  // input, weight, bias
  if (!args) throw std::runtime_error(why);
  const at::Tensor x = (*args)[0].toTensor();
  const c10::IValue weight = (*args)[1], rows(x.numel() / std::max<int64_t>(1, x.size(-1)));
  auto pack = [weight, rows] {
    torch::jit::Stack stack{weight, rows};
    c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn::_reorder_linear_weight", "").callBoxed(&stack);
    return stack.at(0);
  };
  c10::impl::GenericList noScalars(c10::OptionalType::create(c10::NumberType::get()));
  return packedCandidate("fused", pack, "mkldnn::_linear_pointwise",
                         {(*args)[0], c10::IValue(), (*args)[2], c10::IValue(std::string("none")),
                          c10::IValue(noScalars), c10::IValue()},
                         1, packEachCall);
}

// The conv as tuned-kernels' fused= writes it: mkldnn::_convolution_pointwise
// with its weight reordered for the input it sees (packedCandidate), no
// post-op (dense and prepacked are timed without the activation too).
tune::Candidate fusedConvCandidate(const ir::Node& conv, c10::Device device, bool packEachCall) {
  std::string why;
  auto args = tune::benchArguments(conv, device, why);
  if (!args) throw std::runtime_error(why);
  const auto view = ir::Conv2dKernelOp::match(&conv);  // conv2d (fusedIneligible checked)
  std::vector<c10::IValue> mk;  // mkldnn_convolution's order: input, weight, bias, padding, stride, dilation, groups
  for (size_t i : view->mkldnnConvolutionOrder()) mk.push_back((*args)[i]);
  const at::Tensor x = mk[0].toTensor();
  // As the rewrite packs it (ir::Conv2dKernelOp::reorderGeometry): 2.x's
  // reorder takes the input's size.
  const c10::IValue weight = mk[1], padding = mk[3], stride = mk[4], dilation = mk[5], groups = mk[6];
  const std::vector<int64_t> inputSize = x.sizes().vec();
  auto pack = [=] {
    const c10::OperatorHandle reorderOp =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::mkldnn_reorder_conv2d_weight", "");
    torch::jit::Stack reorder{c10::IValue(weight.toTensor().to_mkldnn()), padding, stride, dilation, groups};
    if (reorderOp.schema().arguments().size() > 5) reorder.emplace_back(inputSize);
    reorderOp.callBoxed(&reorder);
    return reorder.at(0);
  };
  c10::impl::GenericList noScalars(c10::OptionalType::create(c10::NumberType::get()));
  mk.emplace_back(std::string("none"));
  mk.emplace_back(noScalars);
  mk.emplace_back(c10::IValue());
  return packedCandidate("fused", pack, "mkldnn::_convolution_pointwise", std::move(mk), 1, packEachCall);
}

// The conv (or linear) as XNNPACK runs it: conv2d_clamp_run (linear_clamp_run)
// with the context packed once (not timed) and its fused clamp, on the dense
// candidate's input.
tune::Candidate xnnpackCandidate(const ir::Node& conv, c10::Device device) {
  std::string why;
  auto args = tune::benchArguments(conv, device, why);
  if (!args) throw std::runtime_error(why);
  const c10::IValue input = (*args)[ir::OpView::of(const_cast<ir::Node*>(&conv)).index("input")];  // conv2d or linear
  const c10::IValue context = xnnpackContext(conv, fusableClamp(const_cast<ir::Node*>(&conv)));
  return tune::boxedCandidate("xnnpack", conv.is("aten::linear") ? "prepacked::linear_clamp_run" : "prepacked::conv2d_clamp_run",
                              "", {input, context});
}

bool onCpuWithShapes(tune::TuningSession& s) {
  return s.context().targetDevice == "cpu" && s.pipelineUses("shape-prop");
}

void offerConvKernels(tune::TuningSession& s) {
  if (!ir::findSchema("aten::mkldnn_convolution", "")) return;
  std::set<std::string> mkldnn;
  std::vector<ir::Node*> convs;
  s.model().forward().walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") && n->owningBlock() == s.model().forward().block()) convs.push_back(n);
  });
  for (ir::Node* n : convs) {
    if (std::string why = mkldnnIneligible(*n); !why.empty()) {
      s.skipped("conv-kernel", n->output()->name(), "conv2d", why);
      continue;
    }
    const bool oneDnn = s.decideOp("conv-kernel", *n, {"conv2d", "mkldnn"}, [&](std::string& why) {
      return convKernelCandidates(*n, s.device(), why);
    });
    if (oneDnn) mkldnn.insert(n->output()->name());
  }
  if (mkldnn.empty()) return;
  rewriters::PipelineElement e;
  e.name = "tuned-kernels";
  e.options.emplace_back("mkldnn", rewriters::joinNameList(mkldnn));
  if (s.preferOpByOp("conv-kernel", std::nullopt, e)) s.keep(e);
}

// One conv's or linear's kernel among dense, prepacked, fused and XNNPACK
// (those it qualifies for; fused only with `offerFused`), or "" when it
// qualifies for none but dense (recorded as skipped).
std::string chooseKernel(tune::TuningSession& s, ir::Node* n, bool offerFused) {
  const bool linear = n->is("aten::linear");
  const std::string kind = linear ? "linear-prepack" : "conv-prepack";
  // A .pt2 holds tensors only: no packed op contexts (prepacked, XNNPACK).
  const bool objects = !s.context().tensorValuesOnly;
  const std::string notPrepacked = !objects ? std::string("OUT is a .pt2, which holds no packed op contexts")
                                   : linear ? linearPrepackIneligible(*n)
                                            : prepackIneligible(*n);
  // oneDNN's own conv or linear with a packed weight and its activation
  // fused (mkldnn::_convolution_pointwise, _linear_pointwise: LibTorch 2.x)
  // is another candidate: it costs less per call than conv2d's oneDNN route
  // and the prepacked context, which is what small convs spend most of
  // their time on (bench/kernel_gap.py).
  const bool withFused =
      offerFused && (linear ? fusedLinearIneligible(*n).empty() : n->is("aten::conv2d") && fusedIneligible(*n).empty());
  if (!notPrepacked.empty() && !withFused) {
    // Recorded once, when offered everything; as a fallback for a conv that
    // chose fused, it is dense.
    if (offerFused) s.skipped(kind, n->output()->name(), "dense", notPrepacked);
    return "";
  }
  // XNNPACK is a candidate too where it runs (its own kernels: only this
  // machine can say whether they win).
  const bool withXnnpack = objects && (linear ? xnnpackLinearIneligible(*n) : xnnpackIneligible(*n)).empty();
  std::vector<std::string> names{"dense"};
  if (notPrepacked.empty()) names.push_back("prepacked");
  if (withFused) names.push_back("fused");
  if (withXnnpack) names.push_back("xnnpack");
  // The candidates beyond dense and prepacked name the cached decisions'
  // context: a decision among fewer candidates is not reused.
  std::string context = withFused ? "fused" : "";
  if (withXnnpack) context += context.empty() ? "xnnpack" : "+xnnpack";
  return s.chooseOp(
      kind, *n, names,
      [&](std::string& why) -> std::optional<std::vector<tune::Candidate>> {
        std::optional<std::vector<tune::Candidate>> candidates;
        if (notPrepacked.empty()) {
          candidates = linear ? linearPrepackCandidates(*n, s.device(), why) : convPrepackCandidates(*n, s.device(), why);
          if (!candidates) return candidates;
        } else {
          auto args = tune::benchArguments(*n, s.device(), why);
          if (!args) return std::nullopt;
          candidates = std::vector<tune::Candidate>{tune::boxedCandidate("dense", n->target(), "", *args)};
        }
        // A .pt2 runs the fused op's weight reorder on every call.
        const bool packEachCall = s.context().tensorValuesOnly;
        if (withFused)
          candidates->push_back(linear ? fusedLinearCandidate(*n, s.device(), packEachCall)
                                       : fusedConvCandidate(*n, s.device(), packEachCall));
        if (withXnnpack) candidates->push_back(xnnpackCandidate(*n, s.device()));
        return candidates;
      },
      context);
}

// The kernels chosen op by op, as the names tuned-kernels' lists take.
struct KernelChoices {
  std::set<std::string> prepacked, xnnpack, fused;

  void add(const std::string& name, const std::string& choice) {
    if (choice == "prepacked") prepacked.insert(name);
    if (choice == "fused") fused.insert(name);
    if (choice == "xnnpack") xnnpack.insert(name);
  }
  bool empty() const { return prepacked.empty() && xnnpack.empty() && fused.empty(); }
  bool operator==(const KernelChoices& o) const {
    return prepacked == o.prepacked && xnnpack == o.xnnpack && fused == o.fused;
  }
  rewriters::PipelineElement element() const {
    rewriters::PipelineElement e;
    e.name = "tuned-kernels";
    if (!prepacked.empty()) e.options.emplace_back("prepacked", rewriters::joinNameList(prepacked));
    if (!xnnpack.empty()) e.options.emplace_back("xnnpack", rewriters::joinNameList(xnnpack));
    if (!fused.empty()) e.options.emplace_back("fused", rewriters::joinNameList(fused));
    return e;
  }
};

// Per conv and linear, its kernel (chooseKernel); the choices checked
// together on the whole model, then, when they do not win, the convs'
// choices without the fused candidate (a fused conv can win alone and
// not among its neighbours: the blocked layouts oneDNN picks per call),
// then the linears' alone.
void offerPrepacked(tune::TuningSession& s) {
  if (!hasPrepackedConvs()) return;
  std::vector<ir::Node*> ops;
  s.model().forward().walk([&](ir::Node* n) {
    if ((n->is("aten::conv2d") || n->is("aten::mkldnn_convolution") || n->is("aten::linear")) &&
        n->owningBlock() == s.model().forward().block() && ir::OpView::of(n).value("weight") &&
        rewriters::constantTensor(ir::OpView::of(n).value("weight")))
      ops.push_back(n);
  });
  KernelChoices best, linearsOnly;
  std::vector<std::pair<ir::Node*, std::string>> chosen;
  for (ir::Node* n : ops) {
    const std::string choice = chooseKernel(s, n, true);
    chosen.emplace_back(n, choice);
    best.add(n->output()->name(), choice);
    if (n->is("aten::linear") && choice != "xnnpack") linearsOnly.add(n->output()->name(), choice);
  }
  if (best.empty()) return;
  if (s.preferOpByOp("conv-prepack", std::nullopt, best.element())) return s.keep(best.element());
  KernelChoices withoutFusedConvs;  // each fused conv's choice among the others
  for (const auto& [n, choice] : chosen)
    withoutFusedConvs.add(n->output()->name(),
                          choice == "fused" && !n->is("aten::linear") ? chooseKernel(s, n, false) : choice);
  if (!withoutFusedConvs.empty() && !(withoutFusedConvs == best) &&
      s.preferOpByOp("conv-prepack", std::nullopt, withoutFusedConvs.element(), "op-by-op without fused convs"))
    return s.keep(withoutFusedConvs.element());
  if (!linearsOnly.empty() && !(linearsOnly == best) && !(linearsOnly == withoutFusedConvs) &&
      s.preferOpByOp("linear-prepack", std::nullopt, linearsOnly.element(), "op-by-op linears"))
    s.keep(linearsOnly.element());
}

// A pass that lowers the model to a floating-point precision (bf16, fp16,
// or fp32 kept by dtype=auto), by its declared effects; int8 is not one.
bool lowersFloatPrecision(const rewriters::PassEffects& e) {
  return e.lowersPrecision && (!e.precision || c10::isFloatingType(*e.precision));
}

// `e` applied wherever its pass can be, as the pass declares it
// (PassEffects::everywhere).
void applyEverywhere(rewriters::PipelineElement& e, const rewriters::PassEffects& fx) {
  for (const auto& [key, value] : fx.everywhere) {
    if (value.empty()) e.eraseOption(key);
    else e.setOption(key, value);
  }
}

// The registered layout pass that declares an everywhere form, as an
// element in that form; nullopt when none does.
std::optional<rewriters::PipelineElement> layoutEverywhere(const tune::TuningSession& s) {
  for (const rewriters::PassInfo* info : s.registry().all()) {
    rewriters::PassEffects fx;
    try {
      fx = s.registry().create(info->name)->effects(s.context());
    } catch (const std::invalid_argument&) {  // a pass that needs options (rules{file=...})
      continue;
    }
    if (!fx.changesLayout || fx.everywhere.empty()) continue;
    rewriters::PipelineElement e{info->name, {}, {}};
    applyEverywhere(e, fx);
    return e;
  }
  return std::nullopt;
}

// The given pipeline as a whole network on one kernel family: the passes
// that lower it to a floating-point precision (their declared effects: bf16,
// fp16, or fp32 kept by dtype=auto; int8 stays) dropped when `fp32`, the
// layout pass applied everywhere (its declared form; added when the
// pipeline has none), and tuned-kernels{`option`=*} where extra passes go
// (before the closing fuse-cudnn).
rewriters::Pipeline networkPipeline(const tune::TuningSession& s, const rewriters::Pipeline& given,
                                    const std::string& option, bool fp32) {
  rewriters::Pipeline p = given;
  rewriters::dropPass(p, "tuned-kernels");
  if (fp32) rewriters::dropPassesWhere(p, s.registry(), lowersFloatPrecision, &s.context());
  std::vector<rewriters::PipelineElement> extra;
  bool hasLayout = false;
  rewriters::forEachExecution(
      p, s.registry(),
      [&hasLayout](rewriters::PipelineElement& e, const rewriters::PassEffects& fx) {
        if (!fx.changesLayout || fx.everywhere.empty()) return;
        applyEverywhere(e, fx);
        hasLayout = true;
      },
      &s.context());
  if (!hasLayout)
    if (std::optional<rewriters::PipelineElement> layout = layoutEverywhere(s)) extra.push_back(std::move(*layout));
  extra.push_back(rewriters::PipelineElement{"tuned-kernels", {{option, "*"}}, {}});
  rewriters::addExtraPasses(p, extra);
  return p;
}

// The ops the tuned pipeline keeps in fp32 (--tune's per-op precision, in
// the option its precision pass declares), or "".
std::string tunedKeepFp32(const tune::TuningSession& s) {
  std::string keep;
  rewriters::Pipeline tuned = s.tunedSoFar();
  rewriters::forEachExecution(
      tuned, s.registry(),
      [&keep](rewriters::PipelineElement& e, const rewriters::PassEffects& fx) {
        if (keep.empty() && !fx.keepFp32Option.empty()) keep = e.option(fx.keepFp32Option);
      },
      &s.context());
  return keep;
}

// The fused network at the precision --tune chose per op: its precision
// pass keeps the same ops in fp32, and tuned-kernels skips them (a
// squeeze-excite's 1x1 convs on a 1x1 image, kept fp32 because
// aten::conv2d's few µs there beat a oneDNN conv's per-call cost, stay on
// aten::conv2d).
rewriters::Pipeline fusedAtTunedPrecision(const tune::TuningSession& s, const rewriters::Pipeline& given,
                                          const std::string& keepFp32) {
  rewriters::Pipeline p = networkPipeline(s, given, "fused", false);
  rewriters::forEachExecution(
      p, s.registry(),
      [&keepFp32](rewriters::PipelineElement& e, const rewriters::PassEffects& fx) {
        if (!fx.keepFp32Option.empty()) e.setOption(fx.keepFp32Option, keepFp32);
        if (e.name == "tuned-kernels") e.setOption("skip", keepFp32);
      },
      &s.context());
  return p;
}

// Whether the model given to --tune has a conv (as it has them: a traced
// model's are aten::_convolution until canonicalize) or a linear (aten::linear,
// or aten::addmm, GPT-2's Conv1D, until canonicalize).
bool hasConvs(const tune::TuningSession& s) {
  bool convs = false;
  s.input().forward().walk([&](ir::Node* n) { convs = convs || ir::ConvOp::isConv(n); });
  return convs;
}
bool hasLinears(const tune::TuningSession& s) {
  bool linears = false;
  s.input().forward().walk([&](ir::Node* n) { linears = linears || n->is("aten::linear") || n->is("aten::addmm"); });
  return linears;
}

// The convs and linears that absorb a post-op on oneDNN's fused kernel
// (fusedPostOpKind; eligible for it), by name, in the tuned pipeline's
// model before tuned-kernels (the names tuned-kernels sees).
std::map<FusedPostOpKind, std::set<std::string>> opsWithPostOps(tune::TuningSession& s) {
  rewriters::Pipeline before = s.tunedSoFar();
  rewriters::dropPass(before, "tuned-kernels");
  const ir::Model m = s.inputAfter(before);
  std::map<FusedPostOpKind, std::set<std::string>> out;
  m.forward().walk([&](ir::Node* n) {
    if (n->owningBlock() != m.forward().block() || n->numOutputs() != 1) return;
    const FusedPostOpKind kind = fusedPostOpKind(n);
    if (kind != FusedPostOpKind::None && (n->is("aten::linear") ? fusedLinearIneligible(*n) : fusedIneligible(*n)).empty())
      out[kind].insert(n->output()->name());
  });
  return out;
}

// The tuned pipeline with the ops `names` on oneDNN's fused kernel and the
// others as --tune chose them per op: they join its tuned-kernels element's
// fused= list and leave its xnnpack= (which would take them first), or a
// tuned-kernels element is added. A fused op saves its post-op's own call,
// where a plain oneDNN op may cost more per call than ATen's route: on an
// AVX2 EPYC at 2 threads BERT's 12 linear+GELU pairs fused ran 0.92x of the
// per-op choice (all MKL), every linear on oneDNN 0.98x
// (docs/benchmarks.md); per op, timed without the post-op, they lose.
rewriters::Pipeline withFused(const tune::TuningSession& s, const std::set<std::string>& names) {
  rewriters::Pipeline tuned = s.tunedSoFar();
  bool found = false;
  rewriters::forEachExecution(
      tuned, s.registry(),
      [&](rewriters::PipelineElement& e, const rewriters::PassEffects&) {
        if (e.name != "tuned-kernels") return;
        found = true;
        std::set<std::string> fused = parseNameList(e.option("fused")), xnnpack = parseNameList(e.option("xnnpack"));
        if (fused.count("*")) return;
        fused.insert(names.begin(), names.end());
        for (const std::string& n : names) xnnpack.erase(n);
        e.setOption("fused", joinNameList(fused));
        if (xnnpack.empty()) e.eraseOption("xnnpack");
        else e.setOption("xnnpack", joinNameList(xnnpack));
      },
      &s.context());
  if (!found)
    rewriters::addExtraPasses(tuned, {rewriters::PipelineElement{"tuned-kernels", {{"fused", joinNameList(names)}}, {}}});
  return tuned;
}

std::vector<std::pair<std::string, rewriters::Pipeline>> networkAlternatives(tune::TuningSession& s,
                                                                             const rewriters::Pipeline& given) {
  std::vector<std::pair<std::string, rewriters::Pipeline>> out;
  // Identical models are timed once (the first name).
  if (hasFusedConvs() || hasFusedLinears()) {
    auto ops = opsWithPostOps(s);
    std::set<std::string>& activations = ops[FusedPostOpKind::Activation];
    std::set<std::string> all = activations;
    all.insert(ops[FusedPostOpKind::ResidualAdd].begin(), ops[FusedPostOpKind::ResidualAdd].end());
    if (!activations.empty()) out.emplace_back("fused-activations", withFused(s, activations));
    if (all.size() > activations.size()) out.emplace_back("fused-post-ops", withFused(s, all));
  }
  if (!hasConvs(s)) return out;
  if (hasFusedConvs()) {
    out.emplace_back("fused-network", networkPipeline(s, given, "fused", false));
    if (rewriters::pipelineHas(given, s.registry(), lowersFloatPrecision, &s.context())) {
      out.emplace_back("fused-network-fp32", networkPipeline(s, given, "fused", true));
      if (const std::string keep = tunedKeepFp32(s); !keep.empty())
        out.emplace_back("fused-network-tuned-precision", fusedAtTunedPrecision(s, given, keep));
    }
  }
  if (target::xnnpackConvRuns() && !s.context().tensorValuesOnly)
    out.emplace_back("xnnpack-network", networkPipeline(s, given, "xnnpack", true));
  return out;
}

}  // namespace

tune::Tunable networkTunable() {
  tune::Tunable t;
  t.kind = "kernel-network";
  t.applies = [](tune::TuningSession& s) { return onCpuWithShapes(s) && (hasConvs(s) || hasLinears(s)); };
  t.alternatives = networkAlternatives;
  t.expectedDecisions = [](const ir::Graph&) { return size_t{1}; };
  return t;
}

tune::Tunable convKernelTunable() {
  tune::Tunable t;
  t.kind = "conv-kernel";
  t.applies = onCpuWithShapes;
  t.offeredBefore = {"fuse-cudnn", "tuned-kernels"};
  t.settles = {tune::TuningAspect::ConvKernels};
  t.offer = offerConvKernels;
  t.listing = {{"conv-kernel", tune::Listing::None}};
  // One decision per conv (linears are not its to decide).
  t.expectedDecisions = [](const ir::Graph& g) {
    size_t convs = 0;
    g.walk([&](ir::Node* n) { convs += ir::ConvOp::isConv(n); });
    return convs;
  };
  return t;
}

tune::Tunable prepackTunable() {
  tune::Tunable t;
  t.kind = "conv-prepack";
  t.applies = onCpuWithShapes;
  t.offeredBefore = {"fuse-cudnn", "tuned-kernels"};
  t.settles = {tune::TuningAspect::WeightPacking};
  // Packs the weights of the convs whose kernels and layout are settled.
  t.buildsOn = {tune::TuningAspect::ConvKernels, tune::TuningAspect::ConvLayout};
  t.offer = offerPrepacked;
  t.expectedDecisions = tune::convsAndLinears;
  return t;
}

}  // namespace ptopt::kernels
