// A deterministic measure::Clock for tests: subjects made by run() advance
// the fake clock by their own scripted duration (with a fixed, repeating
// jitter pattern), and timeMs reads how far it moved. Nothing is timed.
#pragma once

#include "measure/clock.h"

#include <functional>

namespace ptopt::test {

class FakeClock : public measure::Clock {
 public:
  double now = 0;  // ms

  // A subject whose run takes `ms` plus a repeating jitter of up to
  // +-jitter ms; `calls` counts its runs (warm-up included).
  measure::Subject run(double ms, double jitter = 0, int* calls = nullptr) {
    return {"fake", [this, ms, jitter, calls, i = 0]() mutable {
              static const double pattern[] = {0.0, 0.7, -0.4, 1.0, -1.0, 0.3, -0.7, 0.5};
              now += ms + jitter * pattern[i++ % 8];
              if (calls) ++*calls;
            }};
  }
  // A subject whose run takes whatever `duration` returns.
  measure::Subject custom(std::function<double()> duration) {
    return {"custom", [this, duration = std::move(duration)] { now += duration(); }};
  }

  double timeMs(const measure::Subject& s, int calls) override {
    const double before = now;
    for (int i = 0; i < calls; ++i) s.run();
    return (now - before) / (calls > 0 ? calls : 1);
  }
  double elapsedSeconds() const override { return now / 1000; }
};

}  // namespace ptopt::test
