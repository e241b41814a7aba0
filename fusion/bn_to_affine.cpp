#include "fusion/bn_to_affine.h"

#include "fusion/bn_math.h"
#include "rewriters/constants.h"

namespace ptopt::fusion {

using namespace rewriters;

std::string BnToAffinePass::contract() const {
  return "An inference batch_norm with constant statistics that no conv or linear absorbed (DenseNet's BN "
         "after a concat) can become addcmul(shift, x, scale) with precomputed per-channel scale and "
         "shift shaped [C, 1, ...]. On the CPUs measured (bench/bn_vs_affine.py, 1 thread) batch_norm's "
         "inference kernel is 3-5x faster than addcmul, so by default the pass leaves every BatchNorm "
         "alone and says why; force=true converts anyway. Even then it does not fire when the input rank "
         "is unknown (run shape-prop with --input-shape) or the statistics are not constants.";
}

PassResult BnToAffinePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  const bool force = options().getBool("force");
  for (ir::Node* bn : batchNorms(graph)) {
    auto decline = [&](const std::string& why) {
      ctx.decline(name(), bn, why);
      r.count("declined");
    };
    if (!force) {
      decline("batch_norm is faster than a multiply-add on CPU (bench/bn_vs_affine.py); force=true converts anyway");
      continue;
    }
    std::string why;
    auto params = BatchNormParams::read(bn, why);
    if (!params) { decline(why); continue; }
    ir::Value* x = bn->argValue(0);
    if (!x->meta().shape || x->meta().shape->size() < 2) {
      decline("the input rank is unknown (run shape-prop with --input-shape)");
      continue;
    }
    std::vector<int64_t> shape(x->meta().shape->size() - 1, 1);
    shape[0] = params->channels();
    const auto dtype = params->mean.scalar_type();
    ir::Value* scale = addConstant(graph, modulePrefix(bn->argValue(3)->node()->target()) + ".affine_scale",
                                   params->scale().reshape(shape).to(dtype), bn);
    ir::Value* shift = addConstant(graph, modulePrefix(bn->argValue(3)->node()->target()) + ".affine_shift",
                                   params->shift().reshape(shape).to(dtype), bn);
    ir::Value* out = ir::Builder(bn).call("aten::addcmul", {shift, x, scale, 1});
    replaceBatchNorm(bn, out);
    r.count("converted");
    r.changed = true;
  }
  return r;
}

}  // namespace ptopt::fusion
