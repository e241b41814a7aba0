// --tune: the machine-dependent rewrites of a pipeline decided by measuring
// them on this device with the model's real input shapes.
//
// Contract. tunePipeline(model, pipeline, ...) returns the pipeline to run
// instead: the same passes in the same order, with the options of the
// machine-dependent ones filled from measurements, so that every edit is
// still made by a pass through ir::Rewriter (the edit log, --explain and
// --print-changed stay complete) and the result is ordinary TorchScript.
// It works on a copy of the model (the input is not changed): it runs the
// pipeline on the copy element by element, and it knows no pass by name:
// the registered tunables (tune/tunable.h) decide. An element whose pass has
// a tunable is handed to it, which times its candidates on the copy as it is
// at that point and keeps the element with its options filled (or none);
// the tunables that offer passes the pipeline does not name (the kernel
// choices) run where they declare, in their declared order. Each tunable's
// header says what it measures: fusion/bn_to_affine_tuning.h,
// fusion/fuse_cudnn_tuning.h, layout/channels_last_tuning.h,
// layout/onednn_blocked_tuning.h, quant/cast_tuning.h,
// kernels/kernel_tuning.h (conv-kernel, conv-prepack).
// The baseline of every decision is "no rewrite", so a candidate is kept
// only when it wins beyond noise (tune/tuner.h). Micro-benchmark decisions
// are cached by op signature (tune/signature.h), region decisions by region
// signature, whole-model ones by a digest of the graph and the input
// shapes, under the device/LibTorch/threads context (tune/cache.h): a
// decision found there is not timed again, also when the same signature
// recurs within the run. Time is bounded: each decision gets a share of
// what is left of `budgetSeconds` (the shares from the tunables'
// expectedDecisions); when it is spent, the remaining decisions keep their
// baseline (said so per decision). One progress line per decision goes to
// `progress`. Without example inputs (shapes unknown) nothing can be
// measured: tunePipeline throws std::invalid_argument.
#pragma once

#include "ir/model.h"
#include "rewriters/pass.h"
#include "rewriters/pipeline.h"
#include "tune/decision.h"
#include "tune/tuner.h"

#include <nlohmann/json.hpp>

#include <c10/core/Device.h>

#include <map>
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
  // Other intra-op thread counts the tuned model will run at: every
  // whole-model decision (the op-by-op checks, region and pipeline A/Bs) is
  // timed at LibTorch's current count, and a rewrite it keeps is then timed
  // against its baseline at each of these (re-exported there: packs follow
  // the count); one measurably slower at any of them is not kept, the next
  // winner is tried, else the baseline stays. Per-op decisions are timed at
  // the current count only; their assignment reaches the model through a
  // whole-model check. The cache context names these counts.
  std::vector<int> alsoAtThreads;
  Timer* timer = nullptr;   // nullptr: a measure::DeviceClock on `device`
};

// One order of --tune-threads' counts the pipeline was tuned in
// (tune/thread_orders.h): per-op decisions timed at the first count,
// whole-model ones confirmed at the others.
struct TunedOrder {
  std::vector<int> threads;
  std::string pipeline;  // what that tuning chose
  size_t decisions = 0, measured = 0, cached = 0, skipped = 0;
  double seconds = 0, budgetSeconds = 0;
  bool budgetSpent = false;
  bool chosen = false;   // its result is the TuneResult
  std::string note;      // "the same model as 1,2: not timed", or why it could not be compared
  // Its own decisions (TuneResult::toJson()'s), for an order not chosen:
  // the chosen one's are the result's.
  nlohmann::json record;
  nlohmann::json toJson() const;
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
  // How the summary lists a kind's per-op decisions (Tunable::listing);
  // whole-model decisions are always listed.
  std::map<std::string, Listing> listing;
  // With several --tune-threads counts, every order tuned (the chosen one's
  // decisions are `decisions`, followed by the "thread-order" comparisons);
  // the counts above and `seconds` are then those of the whole.
  std::vector<TunedOrder> orders;
  // A few lines for the summary: counts, what changed, time.
  std::string summary() const;
  nlohmann::json toJson() const;
};

TuneResult tunePipeline(const ir::Model& model, const rewriters::Pipeline& pipeline,
                        const rewriters::PassRegistry& registry, const rewriters::PassContext& base,
                        const TuneOptions& options);

}  // namespace ptopt::tune
