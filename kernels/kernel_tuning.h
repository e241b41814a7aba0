// The kernel choices --tune offers (tune/tunable.h) on CPU targets with
// shape-prop in the pipeline, before the closing fuse-cudnn or tuned-kernels
// (else at the end), each a tuned-kernels element (kernels/tuned_kernels.h):
//   conv-kernel   per eligible conv2d, conv2d vs mkldnn_convolution (a
//                 micro-benchmark on the op's real shapes, cached by its
//                 signature); the convs that win, checked together on the
//                 whole model (TuningSession::preferOpByOp) ->
//                 tuned-kernels{mkldnn=...};
//   conv-prepack  after onednn-blocked, per conv and linear still on dense
//                 tensors with a constant weight (those in onednn-blocked's
//                 regions read reordered weights and are left alone), as it
//                 is vs with its weight packed when the model loads, and for
//                 a conv2d or a float32 linear where this LibTorch has XNNPACK, vs XNNPACK with
//                 its relu/relu6 fused (kernels/xnnpack_convs.h), and for a
//                 channels-last conv2d or a linear where this LibTorch has
//                 them (2.x), vs oneDNN's own conv or linear with its weight
//                 packed at load and its activation fused
//                 (mkldnn::_convolution_pointwise, _linear_pointwise,
//                 kernels/onednn_fused_convs.h; the cheapest oneDNN entry
//                 per call, which is what small convs spend their time on)
//                 (micro-benchmarks: conv-prepack and linear-prepack); the
//                 winners checked together on the whole model, then, when
//                 the whole set does not win, each fused conv's choice
//                 among the others (op-by-op without fused convs), then the
//                 linears alone ->
//                 tuned-kernels{prepacked=...,xnnpack=...,fused=...}.
// And the whole networks it proposes instead of the tuned pipeline
// (Tunable::alternatives; kind kernel-network, one whole-model A/B against
// the tuned model, which stays within noise, and, with --tune-threads, not
// slower at the other counts; models identical to another are timed once).
// For a model with convs or linears, where this LibTorch has oneDNN's fused
// ops (2.x), made from the tuned pipeline:
//   fused-activations   every conv and linear whose only reader is an
//                       activation oneDNN fuses (a linear's also through
//                       GPT-2's view) on the fused kernel, the others as
//                       chosen per op (tuned-kernels' fused= list grows);
//   fused-post-ops      the same with the residual adds too.
// Each fused op saves its post-op's call; per op (timed without the
// post-op) the plain oneDNN op may lose to ATen's, so only the whole model
// shows it: BERT's linear+GELU pairs at 2 threads on an AVX2 EPYC.
// For a model with convs, made from the pipeline given to --tune with
// channels-last forced on, where this LibTorch runs them:
//   fused-network       every conv a oneDNN conv (and every linear a
//                       oneDNN linear) with its weight packed at
//                       load and its activation fused
//                       (tuned-kernels{fused=*}: LibTorch 2.x), the
//                       pipeline's cast as given;
//   fused-network-fp32  the same without the cast (when it has one);
//   fused-network-tuned-precision  the same at the precision --tune chose
//                       per op (the ops it kept in fp32 stay off oneDNN);
//   xnnpack-network     every conv and linear on XNNPACK with its relu/relu6 fused, in
//                       float32 (tuned-kernels{xnnpack=*}: where XNNPACK
//                       runs, Debian's 1.13).
// Per-op choices cannot find these: XNNPACK and fused post-ops pay on a
// whole channels-last fp32 network, and the precision decision comes first.
#pragma once

#include "tune/tunable.h"

namespace ptopt::kernels {

tune::Tunable convKernelTunable();
tune::Tunable prepackTunable();
tune::Tunable networkTunable();

}  // namespace ptopt::kernels
