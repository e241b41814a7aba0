// Raise steps: the inverse of a lowering, run by import.
//
// Contract. A pass that lowers to operators the other passes do not read
// (regions on oneDNN tensors, packed-conv objects: the load-time values of
// load_time.h) registers its inverse as a raise step
// (rewriters::PassRegistry::addRaiseStep, next to the pass). importModule
// runs every step given in ImportOptions::raiseSteps, in that order, on every
// method of a model ptopt wrote (one with a load-time holder), so that the
// passes see the dense ops they know and the lowering may apply again. A step
// edits only its own lowering's ops and leaves a graph without them as it is;
// ops of the same names in a model ptopt did not write are the author's and
// stay. ir/ runs the steps and names none of them.
#pragma once

#include <functional>
#include <string>

namespace ptopt::ir {

class Graph;

struct RaiseStep {
  std::string lowering;                  // the pass whose inverse this is (for messages)
  std::function<void(Graph&)> raise;
};

}  // namespace ptopt::ir
