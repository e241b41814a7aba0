// cast: the pass's face (its options, the precision it decides on, its
// declared effects); the walk that assigns each op a precision is
// quant/cast_assign.h, the conversions it materializes quant/cast_values.h.
#include "quant/cast.h"

#include "quant/cast_assign.h"
#include "quant/precision_policy.h"
#include "rewriters/name_list.h"
#include "target/capabilities.h"
#include "target/kernel_probes.h"

#include <stdexcept>

namespace ptopt::quant {

using namespace rewriters;

std::vector<OptionSpec> CastPass::optionSpecs() const {
  return {
      {"dtype", OptionKind::Enum, "auto",
       "target precision (auto: bf16 on a CPU with native bf16, else none; fp16 on CUDA)",
       {"auto", "bf16", "fp16"}, {}, {}},
      {"keep-io", OptionKind::Bool, "true", "keep the dtypes of the graph's inputs and outputs", {}, {}, {}},
      {"clamp", OptionKind::Bool, "false", "fp16: clamp out-of-range weights instead of keeping their op fp32",
       {}, {}, {}},
      {"prefer-bf16", OptionKind::Bool, "false", "dtype=auto picks bf16 on CUDA targets too", {}, {}, {}},
      {"fp32-ops", OptionKind::String, "", "operators to keep in fp32, e.g. 'gelu;softmax'", {}, {}, {}},
      {"lowp-ops", OptionKind::String, "", "operators to run in low precision, e.g. 'avg_pool2d'", {}, {}, {}},
      {"emulate", OptionKind::Bool, "false", "compute in fp32, rounding through the target dtype (fp16 on CPU)",
       {}, {}, {}},
      {"min-channels", OptionKind::Int, "-1",
       "convs whose input and output channels are all below this stay fp32 (-1: 17 for bf16 on CPU targets, "
       "where such convs run slower in bf16; 0 elsewhere)", {}, -1, {}},
      {"keep-fp32", OptionKind::String, "",
       "ops (their results' names, ';'-separated) that stay fp32 whatever their class (set by --tune)", {}, {}, {}},
  };
}

PrecisionPolicy castPolicy(c10::ScalarType target, const std::string& targetDevice, bool emulate) {
  PrecisionPolicy policy = PrecisionPolicy::defaults();
  // silu in fp32 where this CPU's low-precision silu is slower than fp32
  // silu with the two casts around it: probed, not assumed (LibTorch 1.13's
  // bf16 silu is 2.6x slower than its fp32 one, and efficientnet_b0's -O3
  // ran at 0.86x of the original against -O2's 0.71x; 2.15's is faster than
  // fp32 with the casts, and keeping it fp32 there made -O3 slower than -O2).
  if (!emulate && target == c10::ScalarType::BFloat16 && targetDevice != "cuda" &&
      !target::cpuLowPrecisionSiluPays(target))
    policy.set("aten::silu", OpPrecision::Fp32);
  return policy;
}

c10::ScalarType resolveCastDtype(const std::string& option, const std::string& targetDevice, bool preferBf16) {
  if (option == "bf16") return c10::ScalarType::BFloat16;
  if (option == "fp16") return c10::ScalarType::Half;
  if (option != "auto") throw std::invalid_argument("cast: unknown dtype '" + option + "'");
  return targetDevice == "cuda" && !preferBf16 ? c10::ScalarType::Half : c10::ScalarType::BFloat16;
}

CastPass::Precision CastPass::precisionFor(const PassContext& ctx) const {
  const bool preferBf16 = options().getBool("prefer-bf16") || ctx.preferBf16;
  if (options().getString("dtype") != "auto")
    return {resolveCastDtype(options().getString("dtype"), ctx.targetDevice, preferBf16), "", ""};
  // dtype=auto follows the target's capabilities (target/capabilities.h,
  // --assume-isa): on a CPU without native bf16, bf16 would run emulated or
  // in ATen's own kernels, slower than fp32 and less accurate: stay fp32.
  // On a CUDA device without native fp16/bf16 the same; CUDA without native
  // bf16 (sm_75) falls back to fp16.
  const target::AutoPrecision choice =
      target::autoPrecision(ctx.targetDevice, preferBf16, target::assumedIsa(ctx.assumedIsa));
  using D = target::AutoPrecision::Dtype;
  const std::string what = choice.dtype == D::Fp32   ? "fp32 kept (cast{dtype=auto} lowered nothing)"
                           : choice.dtype == D::Bf16 ? "bf16 (cast{dtype=auto})"
                                                     : "fp16 (cast{dtype=auto})";
  Precision p;
  p.autoNote = what + ": " + choice.why;
  p.autoWhy = choice.why;
  if (choice.dtype == D::Bf16) p.dtype = c10::ScalarType::BFloat16;
  if (choice.dtype == D::Fp16) p.dtype = c10::ScalarType::Half;
  return p;
}

PassEffects CastPass::effects(const PassContext& ctx) const {
  PassEffects e;
  e.lowersPrecision = true;
  const Precision p = precisionFor(ctx);
  e.precision = p.dtype;
  e.precisionNote = p.autoNote;
  e.emulateOption = "emulate";
  e.mayChangeSignature = !options().getBool("keep-io");
  e.keepFp32Option = "keep-fp32";
  return e;
}

PassResult CastPass::run(ir::Graph& graph, PassContext& ctx) {
  const Precision precision = precisionFor(ctx);
  CastAssignment cfg;
  cfg.target = precision.dtype.value_or(c10::ScalarType::BFloat16);
  cfg.keepIo = options().getBool("keep-io") || options().getBool("emulate");  // emulation keeps float32 io
  cfg.clamp = options().getBool("clamp");
  cfg.emulate = options().getBool("emulate");
  cfg.cpuKernelsOnly = !cfg.emulate && cfg.target == c10::ScalarType::BFloat16 && ctx.targetDevice != "cuda";
  const int64_t minChannels = options().getInt("min-channels");
  cfg.minChannels = minChannels >= 0 ? minChannels : cfg.cpuKernelsOnly ? 17 : 0;
  cfg.policy = castPolicy(cfg.target, ctx.targetDevice, cfg.emulate);
  cfg.keepFp32 = rewriters::parseNameList(options().getString("keep-fp32"));
  try {
    for (const auto& op : PrecisionPolicy::parseOpList(options().getString("fp32-ops")))
      cfg.policy.set(op, OpPrecision::Fp32);
    for (const auto& op : PrecisionPolicy::parseOpList(options().getString("lowp-ops")))
      cfg.policy.set(op, OpPrecision::LowPrecision);
  } catch (const std::invalid_argument& e) {
    throw PassError("cast: " + std::string(e.what()));
  }
  if (!precision.dtype) {  // dtype=auto keeps fp32 on this target
    ir::Node* first = nullptr;
    graph.walk([&](ir::Node* n) {
      if (!first && cfg.policy.classify(*n) == OpPrecision::LowPrecision) first = n;
    });
    if (first)
      ctx.decline(name(), first,
                  "dtype=auto keeps the whole graph in fp32: " + precision.autoWhy +
                      (ctx.targetDevice == "cuda" ? "" : " (dtype=bf16 forces it)"));
    return unchanged();
  }
  return assignPrecisions(graph, ctx, name(), std::move(cfg));
}

}  // namespace ptopt::quant
