// --tune for several thread counts (--tune-threads 1,2): the pipeline tuned
// once with each count first, and the tuned models compared at every count.
//
// Contract. tuneForThreadCounts(model, pipeline, registry, base, options,
// counts) returns what tunePipeline (tune/tune_model.h) returns, for a file
// that will run at every count of `counts` (intra-op threads, the one that
// matters most first):
//   * one count (or none: LibTorch's current count): tunePipeline at that
//     count, nothing else;
//   * several: one tunePipeline per count, with that count first (its
//     per-op decisions timed there) and the others, in the given order,
//     confirming each whole-model choice (TuneOptions::alsoAtThreads). Which
//     count a choice is made at changes what wins (oneDNN's kernels gain more
//     from a second core than ATen's on some shapes), and no one order serves
//     every machine. The first order's result is the default; another
//     order's replaces it only when its model is Faster at one count and
//     confirmed not Slower at each other (tune/tuner.h: choose, then
//     confirm, both models exported at the count they are timed at). Orders
//     that tuned to the same graph are not timed against each other; an
//     order comparison the budget leaves no time for keeps the default.
// The budget (`options.budgetSeconds`) bounds the whole: each order gets an
// equal share of what is left when it starts, less a tenth kept for the
// comparisons. The comparisons are whole-model decisions ("thread-order"):
// cached under the first order's context and a digest of both graphs and the
// input shapes, so a second run times nothing; the record is appended to the
// chosen order's decisions, and every order is listed in TuneResult::orders.
// LibTorch's thread count is restored on return, also on an exception.
#pragma once

#include "tune/tune_model.h"

#include <vector>

namespace ptopt::tune {

TuneResult tuneForThreadCounts(const ir::Model& model, const rewriters::Pipeline& pipeline,
                               const rewriters::PassRegistry& registry, const rewriters::PassContext& base,
                               TuneOptions options, const std::vector<int>& counts);

}  // namespace ptopt::tune
