// --tune: the machine-dependent rewrites of a pipeline decided by measuring
// them on this device with the model's real input shapes.
//
// Contract. tunePipeline(model, pipeline, ...) returns the pipeline to run
// instead: the same passes in the same order, with the options of the
// machine-dependent ones filled from measurements, so that every edit is
// still made by a pass through ir::Rewriter (the edit log, --explain and
// --print-changed stay complete) and the result is ordinary TorchScript.
// It works on a copy of the model (the input is not changed): it runs the
// pipeline on the copy element by element and, at each machine-dependent
// element, times the candidates on the copy as it is at that point:
//   bn-to-affine    per BatchNorm, batch_norm vs addcmul (micro-benchmark)
//                   -> bn-to-affine{nodes=...} (force=true given: as given);
//   channels-last   per region (layout::channelsLastRegions: the regions
//                   mode=on finds, or those a given regions= names), each
//                   cached under its signature (tune/signature.h:
//                   regionSignature); the uncached ones are the variables
//                   of whole-model A/Bs (the distinct graphs only): all off
//                   vs the set mode=auto converts vs all on, then, with two
//                   or more, each region in program order: the best set so
//                   far without it vs with it, on only when it wins beyond
//                   noise (one region: one A/B) ->
//                   channels-last{mode=on,regions=...} or mode=off; an
//                   element with mode=off stays off;
//   cast            per op the precision table lowers (conv, linear, ...),
//                   fp32 vs the target dtype with its casts
//                   (micro-benchmark) -> cast{dtype=...,min-channels=0,
//                   keep-fp32=<the ops that did not win>}, or no cast at all
//                   when none won (the model stays fp32); dtype=auto
//                   resolves as the pass does (bf16 on CPU, also without
//                   native bf16: measured, not assumed); fp16 on a CPU
//                   target and emulate=true are kept as given (nothing to
//                   time);
//   the conv kernel (CPU targets) per eligible conv2d after all of the
//                   above, conv2d vs mkldnn_convolution (micro-benchmark)
//                   -> a tuned-kernels{mkldnn=...} element, inserted before
//                   the closing fuse-cudnn (or at the end);
//   onednn-blocked  (CPU targets) after the kernels, the whole model with its
//                   conv regions on oneDNN tensors and weights packed at load
//                   (layout/onednn_blocked.h) vs as tuned so far (A/B) ->
//                   an onednn-blocked element after tuned-kernels, or none;
//                   given in the pipeline: as given;
//   conv-prepack    (CPU targets) after onednn-blocked, per conv still on
//                   dense tensors with a constant weight, as it is vs
//                   mkldnn_prepacked::conv2d_run with the weight packed when
//                   the model loads (micro-benchmark), the winners checked as
//                   a whole (A/B) -> a tuned-kernels{prepacked=...} element;
//   fuse-cudnn      (CUDA targets) the whole model with and without it
//                   (A/B) -> kept or dropped.
// The baseline of every decision is "no rewrite", so a candidate is kept
// only when it wins beyond noise (tune/tuner.h). Micro-benchmark decisions
// are cached by op signature (tune/signature.h), channels-last ones by
// region signature, whole-model ones (fuse-cudnn) by a digest of the graph
// and the input shapes, under the device/LibTorch/threads
// context (tune/cache.h): a decision found there is not timed again, also
// when the same signature recurs within the run. Time is bounded: each
// decision gets a share of what is left of `budgetSeconds`; when it is spent,
// the remaining decisions keep their baseline (said so per decision). One
// progress line per decision goes to `progress`. Without example inputs
// (shapes unknown) nothing can be measured: tunePipeline throws
// std::invalid_argument.
#pragma once

#include "ir/model.h"
#include "rewriters/pass.h"
#include "rewriters/pipeline.h"
#include "tune/tuner.h"

#include <nlohmann/json.hpp>

#include <c10/core/Device.h>

#include <ostream>
#include <string>
#include <vector>

namespace ptopt::tune {

// The default --tune-budget: enough for ResNet-50 at -O3 from a cold cache
// on one thread (about 60 distinct op signatures plus two whole-model A/Bs).
constexpr double kDefaultBudgetSeconds = 90.0;

struct TuneOptions {
  double budgetSeconds = kDefaultBudgetSeconds;
  std::string cachePath;  // "" keeps decisions in memory only
  c10::Device device = c10::kCPU;
  std::ostream* progress = nullptr;
  TuneLimits limits;        // per decision; maxSeconds is set from the budget
  Timer* timer = nullptr;   // nullptr: a measure::DeviceClock on `device`
};

struct DecisionRecord {
  std::string kind;       // "bn-to-affine", "channels-last", "precision", "conv-kernel", "onednn-blocked", "conv-prepack", "fuse-cudnn"
  std::string node;       // the op's result name (a channels-last region's: its first conv's), or "model"
  std::string signature;  // the cache key within the context
  std::string choice;     // the chosen candidate
  std::vector<std::string> candidates;
  // The challenger: the chosen candidate when one won, else the best
  // alternative; its median ratio to the baseline and 95% interval.
  std::string challenger;
  double ratio = 1, low = 1, high = 1;
  int rounds = 0;
  double seconds = 0;
  enum class Source { Measured, Cached, Skipped } source = Source::Measured;
  std::string note;  // skipped: why; measured: the tuner's summary
  // Candidates that cannot run on this machine (they threw when built or
  // timed: a kernel this CPU lacks), each with its first error line. They
  // are out of the decision, never an error of the run.
  std::vector<std::pair<std::string, std::string>> out;
  bool rewrites() const { return !candidates.empty() && choice != candidates.front(); }
  nlohmann::json toJson() const;
  std::string line() const;  // one line for progress and --explain-like output
};

struct TuneResult {
  rewriters::Pipeline pipeline;  // what to run instead
  std::vector<DecisionRecord> decisions;
  std::string context;           // the cache context key
  std::string cachePath;
  std::vector<std::string> warnings;  // an unreadable or unwritable cache
  double seconds = 0;
  double budgetSeconds = 0;
  size_t measured = 0, cached = 0, skipped = 0;
  bool budgetSpent = false;
  // A few lines for the summary: counts, what changed, time.
  std::string summary() const;
  nlohmann::json toJson() const;
};

TuneResult tunePipeline(const ir::Model& model, const rewriters::Pipeline& pipeline,
                        const rewriters::PassRegistry& registry, const rewriters::PassContext& base,
                        const TuneOptions& options);

}  // namespace ptopt::tune
