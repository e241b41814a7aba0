#include "fusion/fuse_cudnn_tuning.h"

namespace ptopt::fusion {

namespace {

void tuneFuseCudnn(tune::TuningSession& s, const rewriters::PipelineElement& e) {
  if (s.context().targetDevice != "cuda" || !s.device().is_cuda()) return s.keep(e);  // it declines itself
  ir::Model fused = s.variant(e);
  if (fused.forward().str() == s.model().forward().str()) return s.keep(e);
  if (s.compareModels("fuse-cudnn", s.modelSignature(), {{"unfused", &s.model()}, {"fused", &fused}}).rewrites())
    s.keep(e);
  else
    s.say("tune: fuse-cudnn is dropped: cuDNN's fused kernels measured no faster here");
}

}  // namespace

tune::Tunable fuseCudnnTunable() {
  return tune::elementTunable("fuse-cudnn", "fuse-cudnn", tuneFuseCudnn, tune::Listing::Every);
}

}  // namespace ptopt::fusion
