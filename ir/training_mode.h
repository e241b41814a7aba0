// How a loaded model relates to training mode, so that ptopt can say what it
// does with it (DESIGN.md: never change semantics silently).
//
// ptopt optimizes for inference: the import puts the module in eval mode, so a
// scripted module's `self.training` reads become False, and the preset passes
// remove-dropout and bn-inference specialize the training flags that tracing
// baked in as literals. Three situations look alike in the graph and are told
// apart here:
//  - scripted and saved in training mode: some submodule has training=True and
//    its code reads `self.training` (dropout, batch_norm); read from the
//    module before the import flips it;
//  - traced in training mode: dropout or batch_norm with a literal `True`
//    training flag, where the batch_norm has running statistics;
//  - a BatchNorm without running statistics (track_running_stats=False): its
//    training flag is True in eval mode too, because it always normalizes by
//    the batch's own statistics. That is not training mode; it is kept as is.
#pragma once

#include "ir/model.h"

#include <torch/script.h>

#include <string>
#include <vector>

namespace ptopt::ir {

struct TrainingMode {
  bool scriptedInTraining = false;
  bool tracedInTraining = false;
  size_t batchNormsWithoutStats = 0;

  bool inTraining() const { return scriptedInTraining || tracedInTraining; }
  // "scripted", "traced", "scripted+traced" or "no".
  std::string kind() const;
  // One sentence per situation that applies, naming what ptopt does about it.
  // `tracedFlagsSpecialized`: whether the pipeline turns traced training
  // flags into their inference forms (remove-dropout, bn-inference).
  std::vector<std::string> notes(bool tracedFlagsSpecialized = true) const;
};

// Whether `module` (before eval()) has a submodule in training mode whose
// methods read `self.training`. Call before the module is put in eval mode.
bool readsTrainingFlagInTrainingMode(const torch::jit::Module& module);

// The literal-flag half of the analysis, on an imported model.
void findTrainingLiterals(const Model& model, TrainingMode& mode);

}  // namespace ptopt::ir
