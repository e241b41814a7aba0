#include "quant/fuse_int8_activations_tuning.h"

#include "ir/op_views.h"  // ConvOp, LinearOp
#include "quant/fuse_int8_activations.h"
#include "quant/quantize.h"
#include "rewriters/name_list.h"

#include <set>

namespace ptopt::quant {

namespace {

// The convs and linears the pass would fuse, and those of them not on 1x1
// images (a squeeze-excite's convs run on 1x1 images, where oneDNN's
// per-call cost exceeds the work; a linear's result is not an image).
struct Chains {
  std::set<std::string> all, larger;
  std::set<std::string> plain, depthwise;  // int8 convs heading no chain, and the depthwise ones among them
};

Chains chains(const ir::Graph& g) {
  Chains c;
  for (ir::Node* n : *g.block()) {
    if (int8PlainConv(*n)) {
      c.plain.insert(n->output()->name());
      if (int8DepthwiseConv(g, *n)) c.depthwise.insert(n->output()->name());
      continue;
    }
    if (!int8ActivationChain(*n)) continue;
    c.all.insert(n->output()->name());
    // The chain's dequantized result (conv -> dequantize -> activation) has the float metadata.
    const auto& shape = n->output()->uses().at(0).user->output()->meta().shape;
    if (!shape || shape->size() != 4 || (*shape)[2] * (*shape)[3] > 1) c.larger.insert(n->output()->name());
  }
  return c;
}

void offerFuseInt8Activations(tune::TuningSession& s) {
  const Chains c = chains(s.model().forward());
  if (c.all.empty() && c.plain.empty()) return;  // nothing the pass would rewrite
  if (const std::string why = fuseInt8ActivationsMissing(s.context()); !why.empty()) {
    s.say("fuse-int8-activations: not timed (" + why + ")");
    return;
  }
  // expectedDecisions saw chains only (the fp32 graph's conv + silu).
  if (c.all.empty()) s.expectMoreDecisions(1);
  const rewriters::PipelineElement every = rewriters::elementOf(s.registry(), FuseInt8ActivationsPass().name());
  std::vector<tune::TuningSession::NamedElement> alternatives;
  if (!c.all.empty()) {
    alternatives.push_back({"fused", every});
    if (!c.larger.empty() && c.larger.size() < c.all.size()) {
      rewriters::PipelineElement larger = every;
      larger.setOption("convs", rewriters::joinNameList(c.larger));
      alternatives.push_back({"fused on images larger than 1x1", larger});
    }
  }
  // The x86 engine's own int8 convs run some shapes on a slow generic path
  // on some CPUs (FBGEMM's depthwise convs of channel counts not a multiple
  // of 8 on AVX2): the same convs on oneDNN's kernel, the depthwise ones
  // and all of them (with the chains fused).
  if (!c.depthwise.empty()) {
    rewriters::PipelineElement dw = every;
    dw.setOption("plain", rewriters::joinNameList(c.depthwise));
    alternatives.push_back({c.all.empty() ? "depthwise convs on oneDNN" : "fused, depthwise convs on oneDNN", dw});
  }
  if (!c.plain.empty() && c.plain.size() > c.depthwise.size()) {
    rewriters::PipelineElement all = every;
    all.setOption("plain", "*");
    alternatives.push_back({c.all.empty() ? "every int8 conv on oneDNN" : "fused, every int8 conv on oneDNN", all});
  }
  const size_t kept = s.preferAmong("int8-activations", std::nullopt, alternatives);
  if (kept > 0) s.keep(*alternatives[kept - 1].second);
}

}  // namespace

tune::Tunable fuseInt8ActivationsTunable() {
  tune::Tunable t;
  t.kind = "int8-activations";
  t.applies = [](tune::TuningSession& s) { return s.pipelineUses(QuantizePass().name()) && s.device().is_cpu(); };
  t.offeredBefore = {"fuse-cudnn"};
  t.offer = offerFuseInt8Activations;
  // One A/B where the model given to --tune has a conv whose only reader is
  // silu or hardswish, or a linear whose only reader is one of those or gelu
  // (what quantize may turn into a chain), else none.
  t.expectedDecisions = [](const ir::Graph& g) {
    for (const ir::Node* n : *g.block()) {
      const bool conv = ir::ConvOp::match(n).has_value();
      if ((!conv && !ir::LinearOp::match(n)) || n->output()->uses().size() != 1) continue;
      const ir::Node* u = n->output()->uses()[0].user;
      if (u->is("aten::silu") || u->is("aten::silu_") || u->is("aten::hardswish") || u->is("aten::hardswish_") ||
          (!conv && u->is("aten::gelu")))
        return size_t{1};
    }
    return size_t{0};
  };
  return t;
}

}  // namespace ptopt::quant
