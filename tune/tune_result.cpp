// How --tune's decisions and result print: a decision's progress line and
// JSON (tune/decision.h), the result's summary and --report record
// (tune/tune_model.h).
#include "tune/tune_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

namespace ptopt::tune {

nlohmann::json DecisionRecord::toJson() const {
  const char* src = source == Source::Measured ? "measured" : source == Source::Cached ? "cached" : "skipped";
  nlohmann::json j = {{"kind", kind},   {"node", node},   {"signature", signature}, {"choice", choice},
                      {"candidates", candidates}, {"ratio", ratio}, {"low", low}, {"high", high},
                      {"rounds", rounds}, {"seconds", seconds}, {"source", src}, {"challenger", challenger}};
  if (!note.empty()) j["note"] = note;
  for (const auto& [name, why] : out) j["out"][name] = why;
  for (const ThreadCheck& c : atThreads) j["at_threads"].push_back(c.toJson());
  return j;
}

std::string DecisionRecord::line() const {
  std::string checks;
  for (const ThreadCheck& c : atThreads) checks += "; " + c.line();
  return lineAtOneCount() + checks;
}

std::string DecisionRecord::lineAtOneCount() const {
  const std::string what = fmt::format("{} {}", kind, node == "model" ? "(whole model)" : "%" + node);
  if (source == Source::Skipped) return fmt::format("{}: kept {} ({})", what, choice, note);
  const std::string how = source == Source::Cached ? "cached" : fmt::format("{} rounds, {:.2f} s", rounds, seconds);
  if (candidates.size() < 2 || challenger.empty()) return fmt::format("{}: {} ({})", what, choice, how);
  if (choice == candidates.front())
    return fmt::format("{}: {} kept ({} {:.2f}x [{:.2f}, {:.2f}], {}; {})", what, choice, challenger, ratio, low, high,
                       low > 1.0                          ? "slower"
                       : high < 1.0 && !atThreads.empty() ? "faster at this count, not at another"
                                                          : "no win beyond noise",
                       how);
  return fmt::format("{}: {} {:.2f}x [{:.2f}, {:.2f}] of {} ({})", what, choice, ratio, low, high, candidates.front(),
                     how);
}

std::string TuneResult::summary() const {
  std::map<std::string, std::pair<int, int>> perKind;  // kind -> (rewritten, decided)
  for (const auto& d : decisions) {
    auto& [rewritten, total] = perKind[d.kind];
    ++total;
    if (d.rewrites()) ++rewritten;
  }
  // Kinds decided op by op whose assignment the whole-model check then
  // turned down (preferOpByOp): their per-op choices were not applied.
  std::set<std::string> notApplied;
  for (const auto& d : decisions)
    if (d.node == "model" && d.candidates.size() == 2 && d.candidates.front() == "preset" && !d.rewrites())
      notApplied.insert(d.kind);
  std::string kinds;
  for (const auto& [kind, counts] : perKind)
    kinds += fmt::format("{}{} {}/{}{}", kinds.empty() ? "" : ", ", kind, counts.first, counts.second,
                         notApplied.count(kind) ? " (not applied: the preset's ran as fast)" : "");
  std::string s = fmt::format("tune: {} decisions ({} measured, {} cached, {} skipped) in {:.1f} s of a {:.0f} s budget{}\n",
                              decisions.size(), measured, cached, skipped, seconds, budgetSeconds,
                              budgetSpent ? " (budget spent: the rest kept their baseline)" : "");
  if (!kinds.empty()) s += "tune: rewritten/decided: " + kinds + "\n";
  for (const auto& d : decisions) {
    const auto how = listing.find(d.kind);
    const Listing l = how == listing.end() ? Listing::Rewritten : how->second;
    if (d.node == "model" || l == Listing::Every || (l == Listing::Rewritten && d.rewrites()))
      s += "tune: " + d.line() + "\n";
  }
  // Candidates that cannot run here, once per kind, candidate and reason.
  std::map<std::tuple<std::string, std::string, std::string>, size_t> outHere;
  for (const auto& d : decisions)
    for (const auto& [name, why] : d.out) ++outHere[{d.kind, name, why}];
  for (const auto& [key, count] : outHere) {
    const auto& [kind, name, why] = key;
    s += fmt::format("tune: {} '{}' is out on this machine ({} {}): {}\n", kind, name, count,
                     count == 1 ? "decision" : "decisions", why);
  }
  if (orders.size() > 1) {
    s += fmt::format("tune: tuned in {} thread orders (per-op decisions timed at the first count):\n", orders.size());
    for (const TunedOrder& o : orders)
      s += fmt::format("tune:   {} {}: {} decisions ({} measured, {} cached, {} skipped) in {:.1f} s of {:.0f} s{}{}\n",
                       o.chosen ? "*" : " ", fmt::join(o.threads, ","), o.decisions, o.measured, o.cached, o.skipped,
                       o.seconds, o.budgetSeconds, o.budgetSpent ? " (budget spent)" : "",
                       o.note.empty() ? "" : "; " + o.note);
  }
  s += fmt::format("tune: cache {} ({})\n", cachePath.empty() ? "(none)" : cachePath, context);
  for (const auto& w : warnings) s += "tune: warning: " + w + "\n";
  return s;
}

nlohmann::json TunedOrder::toJson() const {
  nlohmann::json j = {{"threads", threads},   {"pipeline", pipeline}, {"decisions", decisions},
                      {"measured", measured}, {"cached", cached},     {"skipped", skipped},
                      {"seconds", seconds},   {"budget_seconds", budgetSeconds},
                      {"budget_spent", budgetSpent}, {"chosen", chosen}};
  if (!note.empty()) j["note"] = note;
  if (!record.is_null()) j["tuning"] = record;
  return j;
}

nlohmann::json TuneResult::toJson() const {
  nlohmann::json d = nlohmann::json::array();
  for (const auto& r : decisions) d.push_back(r.toJson());
  nlohmann::json o = nlohmann::json::array();
  for (const auto& r : orders) o.push_back(r.toJson());
  return {{"orders", o},
          {"pipeline", rewriters::printPipeline(pipeline)},
          {"context", context},
          {"cache", cachePath},
          {"seconds", seconds},
          {"budget_seconds", budgetSeconds},
          {"budget_spent", budgetSpent},
          {"measured", measured},
          {"cached", cached},
          {"skipped", skipped},
          {"warnings", warnings},
          {"decisions", d}};
}

}  // namespace ptopt::tune
