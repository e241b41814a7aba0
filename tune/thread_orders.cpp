#include "tune/thread_orders.h"

#include "measure/clock.h"
#include "measure/verdict.h"
#include "rewriters/pass_manager.h"
#include "target/capabilities.h"
#include "tune/cache.h"
#include "tune/measuring_device.h"
#include "tune/signature.h"
#include "tune/tunable.h"

#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

namespace ptopt::tune {

namespace {

// The share of the budget kept for the comparisons of the orders' models.
constexpr double kComparisonShare = 0.1;

// LibTorch's intra-op thread count, set for a scope and restored after it.
class ThreadCount {
 public:
  ThreadCount() : before_(at::get_num_threads()) {}
  explicit ThreadCount(int n) : ThreadCount() { set(n); }
  ~ThreadCount() { set(before_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;
  static void set(int n) {
    if (at::get_num_threads() != n) at::set_num_threads(n);
  }

 private:
  int before_;
};

// One order's tuning and the model its pipeline makes of the input.
struct Tuned {
  std::vector<int> order;
  TuneResult result;
  std::optional<ir::Model> model;  // nullopt when the pipeline failed to run again (then never chosen)
  std::string graph;
  std::string note;  // TunedOrder::note
  std::string name() const { return fmt::format("tuned-{}", fmt::join(order, ",")); }
};

// `counts` with `first` moved to the front, the others in their order.
std::vector<int> orderWithFirst(const std::vector<int>& counts, size_t first) {
  std::vector<int> order{counts[first]};
  for (size_t i = 0; i < counts.size(); ++i)
    if (i != first) order.push_back(counts[i]);
  return order;
}

// The comparisons of the orders' models: each a whole-model decision.
class OrderComparison {
 public:
  OrderComparison(const rewriters::PassContext& base, const TuneOptions& o, Timer& timer, double deadline,
                  const std::vector<int>& counts)
      : o_(o), timer_(timer), deadline_(deadline), counts_(counts), inputs_(*base.exampleInputs),
        loadTimeOnce_(!base.tensorValuesOnly) {
    context_ = CacheContext::current(measuringDevice(o.device, target::assumedIsa(base.assumedIsa)).str());
    context_.threads = counts.front();
    context_.confirmedAt.assign(counts.begin() + 1, counts.end());
    context_.packsEachCall = base.tensorValuesOnly;
    try {
      cache_ = TuningCache::open(o.cachePath);
    } catch (const CacheError&) {
      cache_ = TuningCache(o.cachePath);  // the tunings warned already
    }
  }

  // Whether `challenger`'s model replaces `incumbent`'s: Faster at one
  // count, then confirmed not Slower at each other count.
  DecisionRecord compare(const Tuned& incumbent, const Tuned& challenger) {
    DecisionRecord d;
    d.kind = "thread-order";
    d.node = "model";
    d.candidates = {incumbent.name(), challenger.name()};
    d.choice = incumbent.name();
    d.challenger = challenger.name();
    d.signature = d.kind + "|" + digest(incumbent.graph + "\n" + challenger.graph) + " inputs " + inputsSignature(inputs_);
    if (auto hit = cache_.lookup(context_, d.signature)) {
      d.source = DecisionRecord::Source::Cached;
      d.choice = hit->choice == challenger.name() ? challenger.name() : incumbent.name();
      d.ratio = hit->ratio, d.low = hit->low, d.high = hit->high, d.rounds = hit->rounds;
      if (hit->detail.is_object() && hit->detail.contains("at_threads"))
        for (const auto& c : hit->detail["at_threads"]) d.atThreads.push_back(ThreadCheck::fromJson(c));
      return d;
    }
    const ModelVariants variants{{incumbent.name(), &*incumbent.model}, {challenger.name(), &*challenger.model}};
    timings_ = 0;
    const double started = timer_.elapsedSeconds();
    bool decided = false;
    for (size_t i = 0; i < counts_.size() && !decided; ++i) {
      std::optional<Choice> c = choose(variants, counts_[i], d);
      if (!c) return d;  // skipped: why is in the note
      const CandidateResult& r = c->results[1];
      ThreadCheck here = check(counts_[i], r, c->rounds);
      d.atThreads.push_back(here);
      if (i == 0 || r.verdict == CandidateResult::Verdict::Won) d.ratio = r.ratio, d.low = r.low, d.high = r.high;
      if (here.slower) break;  // slower at one count: it cannot replace the incumbent
      if (r.verdict != CandidateResult::Verdict::Won) continue;
      decided = true;
      bool holds = true;
      for (size_t j = 0; j < counts_.size() && holds; ++j) {
        if (j == i) continue;
        std::optional<ThreadCheck> at = confirm(variants, counts_[j], d);
        if (!at) return d;
        record(d, *at);
        holds = !at->slower;
      }
      if (holds) d.choice = challenger.name();
    }
    d.seconds = timer_.elapsedSeconds() - started;  // the choices and the confirmations
    d.note = d.choice == challenger.name() ? "faster at one count, not slower at any"
                                           : "not faster at one count while not slower at the others";
    CachedDecision cd;
    cd.choice = d.choice;
    cd.candidates = d.candidates;
    cd.challenger = d.challenger;
    cd.ratio = d.ratio, cd.low = d.low, cd.high = d.high, cd.rounds = d.rounds, cd.seconds = d.seconds;
    for (const ThreadCheck& c : d.atThreads) cd.detail["at_threads"].push_back(c.toJson());
    cache_.store(context_, d.signature, cd);
    return d;
  }

  void save() {
    try {
      cache_.save();
    } catch (const CacheError&) {  // the tunings warned already
    }
  }

 private:
  // This timing's limits: an equal share of what is left of the budget over
  // the timings a comparison can still take (a choice at each count and a
  // confirmation at each other); nullopt when nothing is left.
  std::optional<TuneLimits> limits() {
    const double left = deadline_ - timer_.elapsedSeconds();
    if (left <= 0) return std::nullopt;
    const size_t most = 2 * counts_.size() - 1;
    TuneLimits l = o_.limits;
    l.maxSeconds = std::min(left, std::max(0.05, left / static_cast<double>(most > timings_ ? most - timings_ : 1)));
    ++timings_;
    return l;
  }

  std::optional<Choice> choose(const ModelVariants& variants, int threads, DecisionRecord& d) {
    auto l = limits();
    if (!l) return skip(d, "the --tune-budget is spent");
    ThreadCount at(threads);
    try {
      Choice c = Tuner(timer_).choose(wholeModelCandidates(variants, inputs_, o_.device, loadTimeOnce_), *l);
      d.rounds += c.rounds;
      if (c.baselineFailed) return skip(d, "the first order's model failed: " + firstLine(c.results[0].error));
      if (c.results[1].verdict == CandidateResult::Verdict::Failed)
        return skip(d, "the other order's model failed: " + firstLine(c.results[1].error));
      return c;
    } catch (const std::exception& e) {
      return skip(d, "cannot export the models: " + firstLine(e.what()));
    }
  }

  std::optional<ThreadCheck> confirm(const ModelVariants& variants, int threads, DecisionRecord& d) {
    auto l = limits();
    if (!l) {
      skip(d, "the --tune-budget is spent");
      return std::nullopt;
    }
    ThreadCount at(threads);
    try {
      const std::vector<Candidate> pair = wholeModelCandidates(variants, inputs_, o_.device, loadTimeOnce_);
      ThreadCheck c = Tuner(timer_).confirm(pair[0], pair[1], threads, *l);
      d.rounds += c.rounds;
      return c;
    } catch (const std::exception& e) {
      skip(d, "cannot export the models: " + firstLine(e.what()));
      return std::nullopt;
    }
  }

  // `c` in the record's checks: one per count, a confirmation replacing the
  // choice made at that count before.
  static void record(DecisionRecord& d, const ThreadCheck& c) {
    for (ThreadCheck& earlier : d.atThreads)
      if (earlier.threads == c.threads) {
        earlier = c;
        return;
      }
    d.atThreads.push_back(c);
  }

  // The challenger's result at `threads` from a choice, as a check.
  ThreadCheck check(int threads, const CandidateResult& r, int rounds) const {
    ThreadCheck c;
    c.threads = threads;
    c.rounds = rounds;
    c.challenger = r.name;
    c.ratio = r.ratio, c.low = r.low, c.high = r.high;
    c.slower = measure::judge({r.ratio, r.low, r.high}, o_.limits.margin) == measure::Verdict::Slower;
    return c;
  }

  static std::nullopt_t skip(DecisionRecord& d, const std::string& why) {
    d.source = DecisionRecord::Source::Skipped;
    d.choice = d.candidates.front();
    d.note = why;
    return std::nullopt;
  }

  const TuneOptions& o_;
  Timer& timer_;
  double deadline_;
  const std::vector<int>& counts_;
  const std::vector<c10::IValue>& inputs_;
  bool loadTimeOnce_;
  CacheContext context_;
  TuningCache cache_;
  size_t timings_ = 0;
};

TunedOrder describe(const std::vector<int>& threads, const TuneResult& r) {
  TunedOrder o;
  o.threads = threads;
  o.pipeline = rewriters::printPipeline(r.pipeline);
  o.decisions = r.decisions.size();
  o.measured = r.measured, o.cached = r.cached, o.skipped = r.skipped;
  o.seconds = r.seconds;
  o.budgetSeconds = r.budgetSeconds;
  o.budgetSpent = r.budgetSpent;
  return o;
}

}  // namespace

TuneResult tuneForThreadCounts(const ir::Model& model, const rewriters::Pipeline& pipeline,
                               const rewriters::PassRegistry& registry, const rewriters::PassContext& base,
                               TuneOptions options, const std::vector<int>& given) {
  std::vector<int> counts;
  for (int n : given)
    if (std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
  ThreadCount restore;
  if (counts.size() < 2 || pipeline.empty() || !base.exampleInputs) {
    if (!counts.empty()) ThreadCount::set(counts.front());
    return tunePipeline(model, pipeline, registry, base, options);
  }
  // One clock for the whole: the budget bounds every order and comparison.
  std::unique_ptr<measure::DeviceClock> own;
  if (!options.timer) own = std::make_unique<measure::DeviceClock>(options.device, measure::DeviceClock::Options{true, true});
  Timer& timer = options.timer ? *options.timer : *own;
  options.timer = &timer;
  const double start = timer.elapsedSeconds();
  const double total = options.budgetSeconds;
  auto say = [&](const std::string& line) {
    if (options.progress) *options.progress << line << "\n" << std::flush;
  };

  std::vector<Tuned> tuned;
  for (size_t k = 0; k < counts.size(); ++k) {
    Tuned t;
    t.order = orderWithFirst(counts, k);
    TuneOptions o = options;
    o.alsoAtThreads.assign(t.order.begin() + 1, t.order.end());
    const double spent = timer.elapsedSeconds() - start;
    o.budgetSeconds = std::max(0.0, (total * (1 - kComparisonShare) - spent) / static_cast<double>(counts.size() - k));
    say(fmt::format("tune: order {} of {}: per-op decisions at {} thread{}, whole-model ones confirmed at {}", k + 1,
                    counts.size(), t.order.front(), t.order.front() == 1 ? "" : "s",
                    fmt::join(t.order.begin() + 1, t.order.end(), ",")));
    ThreadCount::set(t.order.front());
    t.result = tunePipeline(model, pipeline, registry, base, o);
    tuned.push_back(std::move(t));
  }
  ThreadCount::set(counts.front());

  // The orders' models; a graph an earlier order made already is not timed again.
  {
    torch::jit::GraphOptimizerEnabledGuard executor(!base.tensorValuesOnly);
    for (Tuned& t : tuned) {
      ir::Model m = model.clone();
      rewriters::PassContext ctx = base.forTrial();
      ctx.edits.setKeepText(false);
      try {
        rewriters::PassManager(registry, t.result.pipeline).run(m, ctx);
      } catch (const std::exception& e) {
        t.note = "its pipeline does not run again: " + firstLine(e.what());
        say(fmt::format("tune: order {}: {}", fmt::join(t.order, ","), t.note));
        continue;
      }
      t.graph = m.forward().str();
      t.model = std::move(m);
    }
  }
  size_t chosen = 0;
  std::vector<DecisionRecord> comparisons;
  size_t measured = 0, cached = 0, skipped = 0;
  OrderComparison compare(base, options, timer, start + total, counts);
  {
    torch::jit::GraphOptimizerEnabledGuard executor(!base.tensorValuesOnly);
    for (size_t k = 1; k < tuned.size() && tuned.front().model; ++k) {
      if (!tuned[k].model) continue;
      const auto same = std::find_if(tuned.begin(), tuned.begin() + static_cast<std::ptrdiff_t>(k),
                                     [&](const Tuned& t) { return t.model && t.graph == tuned[k].graph; });
      if (same != tuned.begin() + static_cast<std::ptrdiff_t>(k)) {
        tuned[k].note = fmt::format("the same model as {}: not timed", fmt::join(same->order, ","));
        say(fmt::format("tune: order {}: {}", fmt::join(tuned[k].order, ","), tuned[k].note));
        continue;
      }
      DecisionRecord d = compare.compare(tuned[chosen], tuned[k]);
      ++(d.source == DecisionRecord::Source::Measured ? measured
         : d.source == DecisionRecord::Source::Cached ? cached
                                                       : skipped);
      say(fmt::format("tune       {:5.1f} s  {}", timer.elapsedSeconds() - start, d.line()));
      if (d.rewrites()) chosen = k;
      comparisons.push_back(std::move(d));
    }
  }
  compare.save();

  TuneResult result = std::move(tuned[chosen].result);
  std::vector<TunedOrder> orders;
  for (size_t k = 0; k < tuned.size(); ++k) {
    const TuneResult& r = k == chosen ? result : tuned[k].result;
    orders.push_back(describe(tuned[k].order, r));
    orders.back().chosen = k == chosen;
    orders.back().note = tuned[k].note;
    if (k != chosen) orders.back().record = r.toJson();
    measured += r.measured, cached += r.cached, skipped += r.skipped;
    result.budgetSpent = result.budgetSpent || r.budgetSpent;
    for (const std::string& w : r.warnings)
      if (std::find(result.warnings.begin(), result.warnings.end(), w) == result.warnings.end())
        result.warnings.push_back(w);
  }
  for (DecisionRecord& d : comparisons) result.decisions.push_back(std::move(d));
  result.orders = std::move(orders);
  result.measured = measured, result.cached = cached, result.skipped = skipped;
  result.seconds = timer.elapsedSeconds() - start;
  result.budgetSeconds = total;
  return result;
}

}  // namespace ptopt::tune
