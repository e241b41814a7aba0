// A deterministic Timer for the tuner's tests: each candidate's time per call
// is scripted by its name, with a fixed, repeating noise pattern; the clock
// advances by exactly the time "spent", so budgets are tested without
// timing anything.
#pragma once

#include "tune/tuner.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::test {

class FakeTimer : public tune::Timer {
 public:
  // `noise`: relative amplitude; sample k of the i-th candidate seen is
  // scaled by 1 + noise * pattern[(k + 5 i) % pattern.size()] (candidates'
  // noise is not in step, as on a real machine).
  explicit FakeTimer(std::map<std::string, double> msPerCall, double noise = 0.0, double defaultMs = 1.0)
      : ms_(std::move(msPerCall)), noise_(noise), defaultMs_(defaultMs) {}

  // Times by a rule on the name where `rule` answers (a name that encodes a
  // set, as channels-last's "regions=a;b"), else as scripted.
  void setRule(std::function<std::optional<double>(const std::string&)> rule) { rule_ = std::move(rule); }

  double timeMs(const tune::Candidate& c, int calls) override {
    for (int i = 0; i < calls; ++i) c.run();  // a candidate that throws, throws here
    static const std::vector<double> pattern{0.0, 1.0, -1.0, 0.5, -0.5, 0.8, -0.8, 0.2, -0.2, 0.9, -0.9};
    if (!offset_.count(c.name)) offset_[c.name] = 5 * offset_.size();
    size_t& k = count_[c.name];
    auto it = ms_.find(c.name);
    std::optional<double> ruled = rule_ ? rule_(c.name) : std::nullopt;
    const double base = ruled ? *ruled : it == ms_.end() ? defaultMs_ : it->second;
    const double ms = base * (1.0 + noise_ * pattern[(k++ + offset_[c.name]) % pattern.size()]);
    clockSeconds_ += ms * calls / 1000.0;
    ++samples_;
    return ms;
  }
  double elapsedSeconds() const override { return clockSeconds_; }
  size_t samples() const { return samples_; }
  // Samples taken of candidates named `name` (warm-up included).
  size_t samplesOf(const std::string& name) const {
    auto it = count_.find(name);
    return it == count_.end() ? 0 : it->second;
  }
  // Every candidate name timed, in first-seen order.
  std::vector<std::string> names() const {
    std::vector<std::pair<size_t, std::string>> byOffset;
    for (const auto& [name, offset] : offset_) byOffset.emplace_back(offset, name);
    std::sort(byOffset.begin(), byOffset.end());
    std::vector<std::string> out;
    for (const auto& [offset, name] : byOffset) out.push_back(name);
    return out;
  }

 private:
  std::map<std::string, double> ms_;
  std::function<std::optional<double>(const std::string&)> rule_;
  double noise_, defaultMs_;
  std::map<std::string, size_t> count_, offset_;
  double clockSeconds_ = 0;
  size_t samples_ = 0;
};

}  // namespace ptopt::test
