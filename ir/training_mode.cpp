#include "ir/training_mode.h"

#include <fmt/format.h>

#include <functional>

namespace ptopt::ir {

std::string TrainingMode::kind() const {
  if (scriptedInTraining && tracedInTraining) return "scripted+traced";
  if (scriptedInTraining) return "scripted";
  if (tracedInTraining) return "traced";
  return "no";
}

std::vector<std::string> TrainingMode::notes(bool tracedFlagsSpecialized) const {
  std::vector<std::string> out;
  if (scriptedInTraining)
    out.push_back("the model was scripted and saved in training mode (training=True): ptopt optimizes it for "
                  "inference in eval semantics (dropout off, BatchNorm on its running statistics) and verifies "
                  "against the original in eval mode; --keep-training refuses instead");
  if (tracedInTraining && !tracedFlagsSpecialized)
    out.push_back("the model was traced in training mode (its dropout and batch_norm training flags are literals); "
                  "this pipeline keeps them, so it is verified in training semantics");
  else if (tracedInTraining)
    out.push_back("the model was traced in training mode (its dropout and batch_norm training flags are literals): "
                  "ptopt optimizes it for inference in eval semantics and verifies against the same weights with "
                  "those flags in their inference forms; --keep-training refuses instead");
  if (batchNormsWithoutStats > 0)
    out.push_back(fmt::format("{} BatchNorm(s) without running statistics (track_running_stats=False) kept as they "
                              "are: they normalize by the batch's own statistics in eval mode too",
                              batchNormsWithoutStats));
  return out;
}

namespace {

bool graphReadsTraining(const torch::jit::Block* block) {
  for (const torch::jit::Node* n : block->nodes()) {
    if (n->kind() == c10::prim::GetAttr && n->s(c10::attr::name) == "training") return true;
    for (const torch::jit::Block* b : n->blocks())
      if (graphReadsTraining(b)) return true;
  }
  return false;
}

}  // namespace

bool readsTrainingFlagInTrainingMode(const torch::jit::Module& module) {
  for (const torch::jit::Module& m : module.modules()) {
    if (!m.is_training()) continue;
    for (const torch::jit::Method& method : m.get_methods())
      if (graphReadsTraining(method.graph()->block())) return true;
  }
  return false;
}

void findTrainingLiterals(const Model& model, TrainingMode& mode) {
  mode.tracedInTraining = false;
  mode.batchNormsWithoutStats = 0;
  for (const auto& [name, graph] : model.methods)
    graph->walk([&](Node* n) {
      auto literalTrue = [&](size_t i) {
        return i < n->numArgs() && n->arg(i).isLiteral() && n->arg(i).literal() == Literal(true);
      };
      auto literalNone = [&](size_t i) {
        return i < n->numArgs() && n->arg(i).isLiteral() && n->arg(i).literal().isNone();
      };
      if (n->is("aten::batch_norm") && literalTrue(5)) {
        // Without running statistics the flag is True in eval mode too.
        if (literalNone(3) || literalNone(4)) ++mode.batchNormsWithoutStats;
        else mode.tracedInTraining = true;
      } else if (n->isCall() && n->target().find("dropout") != std::string::npos && literalTrue(2)) {
        mode.tracedInTraining = true;
      }
    });
}

}  // namespace ptopt::ir
