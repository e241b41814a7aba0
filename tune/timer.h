// The real Timer of the tuner (tune/tuner.h): a steady clock around
// back-to-back calls. For a CUDA device it synchronizes the device before
// starting the clock and before reading it, so that a sample covers the
// kernels the calls enqueued, not only their launch. On a CPU running one
// intra-op thread it reads the calling thread's CPU time instead (the same
// latency on an idle machine, without the time other processes held the
// core on a busy one). The budget (elapsedSeconds) is always wall time.
#pragma once

#include "tune/tuner.h"

#include <c10/core/Device.h>

#include <chrono>

namespace ptopt::tune {

class SteadyTimer : public Timer {
 public:
  explicit SteadyTimer(c10::Device device = c10::kCPU);
  double timeMs(const Candidate& c, int calls) override;
  double elapsedSeconds() const override;

 private:
  void sync() const;
  c10::Device device_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ptopt::tune
