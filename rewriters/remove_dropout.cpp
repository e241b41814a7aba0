#include "rewriters/remove_dropout.h"

#include <set>

namespace ptopt::rewriters {

std::string RemoveDropoutPass::contract() const {
  return "Every dropout form (dropout, feature_dropout, alpha_dropout, feature_alpha_dropout and "
         "their in-place variants) is replaced by its input, whatever its train argument says: a "
         "model traced in training mode bakes train=True in as a literal, and inference must not "
         "drop activations. Does not fire when the graph has no dropout. Removing a training-mode "
         "dropout changes outputs on purpose; verification compares against eval semantics.";
}

bool isDropout(const ir::Node* n) {
  static const std::set<std::string> kDropouts = {
      "aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::feature_dropout_",
      "aten::alpha_dropout", "aten::alpha_dropout_", "aten::feature_alpha_dropout",
      "aten::feature_alpha_dropout_"};
  return n->isCall() && kDropouts.count(n->target()) && n->numArgs() >= 1 && n->arg(0).isValue();
}

PassResult RemoveDropoutPass::run(ir::Graph& graph, PassContext&) {
  PassResult r;
  std::vector<ir::Node*> dropouts;
  graph.walk([&](ir::Node* n) {
    if (isDropout(n)) dropouts.push_back(n);
  });
  for (ir::Node* n : dropouts) {
    n->output()->replaceAllUsesWith(n->argValue(0));
    n->destroy();
    r.count("removed");
  }
  r.changed = !dropouts.empty();
  return r;
}

}  // namespace ptopt::rewriters
