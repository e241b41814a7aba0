// A clock that times nothing, for reproducible runs of everything built on a
// measure::Clock (the tuner's decisions above all): `ptopt --tune
// --reproducible-clock` (driver::Request::reproducibleClock; the CLI also
// takes PTOPT_REPRODUCIBLE_CLOCK=1, which scripts/output_digests.py sets so
// that a refactor's --tune outputs can be compared byte for byte).
//
// Contract. timeMs runs the subject once (a candidate that throws on this
// machine still throws, and is out as it would be) and returns a time that
// depends on the subject's name alone: 1 ms plus the name's FNV-1a hash
// modulo 1000, in microseconds. The same names give the same times on every
// machine and in every run, so every decision is a function of the
// candidates offered. elapsedSeconds advances by the times it returned, times
// the calls asked for, so budgets run out after a fixed amount of
// (fictitious) work. Decisions made on it mean nothing about speed: the
// caller keeps them out of any tuning cache.
#pragma once

#include "measure/clock.h"

namespace ptopt::measure {

class ReproducibleClock : public Clock {
 public:
  double timeMs(const Subject& s, int calls) override;
  double elapsedSeconds() const override { return elapsedMs_ / 1000; }
  // The time timeMs gives a subject of this name.
  static double msFor(const std::string& name);

 private:
  double elapsedMs_ = 0;
};

}  // namespace ptopt::measure
