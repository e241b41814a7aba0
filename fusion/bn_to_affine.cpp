#include "fusion/bn_to_affine.h"

#include "fusion/bn_math.h"
#include "rewriters/constants.h"

#include <algorithm>
#include <set>

namespace ptopt::fusion {

using namespace rewriters;

PassResult BnToAffinePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  const bool force = options().getBool("force");
  // nodes=a;b: exactly these (measured by --tune), the others stay.
  std::set<std::string> only;
  for (size_t start = 0, end; start < options().getString("nodes").size(); start = end + 1) {
    const std::string& list = options().getString("nodes");
    end = std::min(list.find(';', start), list.size());
    if (end > start) only.insert(list.substr(start, end - start));
  }
  for (ir::Node* node : batchNorms(graph)) {
    auto decline = [&](const std::string& why) {
      ctx.decline(name(), node, why);
      r.count("declined");
    };
    if (!only.empty()) {
      if (!only.count(node->output()->name())) {
        decline("measured (--tune): batch_norm is not slower than a multiply-add here");
        continue;
      }
    } else if (!force) {
      decline("batch_norm is faster than a multiply-add on CPU (bench/bn_vs_affine.py); force=true converts anyway");
      continue;
    }
    std::string why;
    auto params = BatchNormParams::read(node, why);
    if (!params) { decline(why); continue; }
    auto bn = ir::BatchNormOp::match(node);
    ir::Value* x = bn->input();
    if (!x->meta().shape || x->meta().shape->size() < 2) {
      decline("the input rank is unknown (run shape-prop with --input-shape)");
      continue;
    }
    std::vector<int64_t> shape(x->meta().shape->size() - 1, 1);
    shape[0] = params->channels();
    const auto dtype = params->mean.scalar_type();
    const std::string prefix = modulePrefix(bn->runningMean()->node()->target());
    ir::Value* scale = rw.addConstant(prefix + ".affine_scale", params->scale().reshape(shape).to(dtype), node);
    ir::Value* shift = rw.addConstant(prefix + ".affine_shift", params->shift().reshape(shape).to(dtype), node);
    ir::Value* out = rw.call(node, "aten::addcmul", {shift, x, scale, 1});
    replaceBatchNorm(rw, *bn, out);
    r.count("converted");
  }
  r.changed = rw.changed();
  return r;
}

}  // namespace ptopt::fusion
