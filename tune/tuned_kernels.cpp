#include "tune/tuned_kernels.h"

#include "ir/literal.h"
#include "ir/op_views.h"
#include "rewriters/constants.h"
#include "rewriters/registry.h"

#include <memory>

namespace ptopt::tune {

using namespace rewriters;

std::vector<OptionSpec> TunedKernelsPass::optionSpecs() const {
  return {{"mkldnn", OptionKind::String, "",
           "convs (their results' names, ';'-separated) to run as aten::mkldnn_convolution", {}, {}, {}}};
}

std::string mkldnnIneligible(const ir::Node& n) {
  if (!n.is("aten::conv2d")) return "not an aten::conv2d";
  if (!n.overload().empty()) return "the conv's padding is a string (\"same\"/\"valid\")";
  const auto conv = ir::ConvOp::match(&n);
  if (!conv) return "the conv's groups or transposed flag is not a literal";
  if (!conv->has("groups")) return "the conv has defaulted arguments";
  for (const char* list : {"stride", "padding", "dilation"})
    if (!conv->intListArg(list)) return "the conv's stride/padding/dilation are not literal";
  const auto w = rewriters::constantTensor(conv->weight());
  if (!w || w->dim() != 4) return "the conv's weight is not a constant 4-D tensor";
  if (!w->device().is_cpu()) return "the conv's weight is not on the CPU";
  const ir::TensorMeta& m = conv->input()->meta();
  if (!m.shape || m.shape->size() != 4 || !m.dtype)
    return "the input is not known to be a 4-D tensor (run shape-prop with --input-shape)";
  if (*m.dtype != c10::ScalarType::Float && *m.dtype != c10::ScalarType::BFloat16)
    return "the input is " + ir::dtypeName(*m.dtype) + ", not float32 or bfloat16";
  if (m.device && !m.device->is_cpu()) return "the input is not on the CPU";
  if (w->scalar_type() != *m.dtype) return "the weight's dtype differs from the input's";
  return "";
}

PassResult TunedKernelsPass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  const std::set<std::string> names = parseNameList(options().getString("mkldnn"));
  if (names.empty()) return r;
  if (ctx.targetDevice != "cpu") {
    ctx.decline(name(), graph.block()->outputNode(), "the target is " + ctx.targetDevice + ": oneDNN convs are CPU kernels");
    return r;
  }
  if (!ir::findSchema("aten::mkldnn_convolution", "")) {
    ctx.decline(name(), graph.block()->outputNode(), "this LibTorch has no aten::mkldnn_convolution");
    return r;
  }
  ir::Rewriter rw(graph, ctx.edits, name());
  std::vector<ir::Node*> convs;
  graph.walk([&](ir::Node* n) {
    if (n->is("aten::conv2d") && n->numOutputs() == 1 && names.count(n->output()->name())) convs.push_back(n);
  });
  for (ir::Node* n : convs) {
    if (std::string why = mkldnnIneligible(*n); !why.empty()) {
      if (ctx.declineOnce(name(), n, why)) r.count("declined");
      continue;
    }
    const auto conv = ir::ConvOp::match(n);
    // mkldnn_convolution(self, weight, bias, padding, stride, dilation, groups)
    std::vector<ir::Arg> args{conv->arg("input"),   conv->arg("weight"),   conv->arg("bias"),
                              conv->arg("padding"), conv->arg("stride"),   conv->arg("dilation"),
                              conv->arg("groups")};
    ir::Node* k = graph.createCall("aten::mkldnn_convolution", std::move(args), {c10::TensorType::get()});
    k->setScope(n->scope());
    k->output()->meta() = n->output()->meta();
    k->setProvenance("tuned-kernels(mkldnn)");
    rw.insert(k, n);
    rw.replace(n, k->output());
    r.count("mkldnn");
  }
  r.changed = rw.changed();
  return r;
}

void registerTunePasses(rewriters::PassRegistry& registry) {
  registry.add([] { return std::make_unique<TunedKernelsPass>(); });
}

}  // namespace ptopt::tune
