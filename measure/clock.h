// How ptopt times a piece of work: one clock abstraction for `ptopt bench`,
// the never-slower stage (driver/measure.h) and the tuner (tune/tuner.h).
//
// A Subject is one thing to time (a model's forward, a candidate kernel); a
// Clock runs it `calls` times back to back and returns the milliseconds per
// call. The real clock, DeviceClock, picks the method from the device:
//   CUDA   the device is synchronized first, then the calls are timed by
//          CUDA events on the current stream (when this build compiled CUDA
//          in; otherwise by the steady clock around a synchronize);
//   CPU    with one intra-op thread (and `threadCpuAtOneThread`), the
//          calling thread's CPU time: every kernel runs on this thread, so
//          this is the latency without the time other processes held the
//          core; otherwise the steady clock.
// Budgets are always read on elapsedSeconds(), wall time since the clock was
// made. Tests use fakes whose times are scripted (tests/tune/fake_timer.h,
// tests/measure/fake_clock.h), so every decision built on a Clock is tested
// without timing anything.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <functional>
#include <string>

namespace ptopt::measure {

struct Subject {
  std::string name;            // "IN", "output", "mkldnn", "channels-last=on"
  std::function<void()> run;   // one call (CUDA: enqueues; the clock synchronizes)
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds per call of `s.run` over `calls` back-to-back calls.
  virtual double timeMs(const Subject& s, int calls) = 0;
  // Wall seconds since this clock was made (budgets are measured on it).
  virtual double elapsedSeconds() const = 0;
};

class DeviceClock : public Clock {
 public:
  struct Options {
    bool threadCpuAtOneThread = true;  // CPU, one intra-op thread: thread CPU time (see above)
    bool inferenceMode = false;        // run the calls under c10::InferenceMode
  };
  explicit DeviceClock(c10::Device device = c10::kCPU) : DeviceClock(device, Options{}) {}
  DeviceClock(c10::Device device, Options options);
  double timeMs(const Subject& s, int calls) override;
  double elapsedSeconds() const override;
  // What timeMs reads now: "thread CPU time", "steady_clock", "CUDA events", ...
  std::string method() const;

 private:
  bool threadCpuNow() const;
  c10::Device device_;
  Options options_;
  std::chrono::steady_clock::time_point start_;
};

// The calling thread's CPU time, in milliseconds.
double threadCpuMs();

}  // namespace ptopt::measure
