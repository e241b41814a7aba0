// The one verdict rule of ptopt's measurements: whether B is faster or
// slower than A, from the 95% bootstrap interval of median(B)/median(A)
// (measure/stats.h) and a margin m (2% by default):
//   Faster              the whole interval lies below 1 - m
//   Slower              the whole interval lies above 1 + m
//   NoClearDifference   otherwise: noise alone never decides
// and when more samples cannot change the answer to a question (the
// sampler's early stop, measure/sampler.h): B can still turn out Faster only
// while the interval's low end is at or below 1 - m, Slower only while its
// high end is at or above 1 + m. The never-slower stage asks "is OUT
// slower?", the tuner "is this candidate faster than the baseline?"; `ptopt
// bench` prints the same verdict.
#pragma once

#include "measure/stats.h"

#include <string>
#include <vector>

namespace ptopt::measure {

enum class Verdict { Faster, NoClearDifference, Slower };
std::string verdictName(Verdict v);  // "faster", "no clear difference", "slower"

Verdict judge(const RatioEstimate& r, double margin);

// Whether more samples could still make the verdict `v` (Faster or Slower).
bool couldStillBe(Verdict v, const RatioEstimate& r, double margin);

// Whether neither Faster nor Slower can still change: the verdict is
// already one of them, or the interval lies within 1 +- m.
bool verdictSettled(const RatioEstimate& r, double margin);

// Whether the never-slower question "is B slower than A?" is answered: B is
// judged Slower, or the interval's high end lies below 1 + m, so that no
// more samples can make it Slower (B is kept; whether it is also faster is
// not asked, and the verdict says "faster" only when the interval shows it).
bool slowerSettled(const RatioEstimate& r, double margin);

// Whether B could still be judged Slower once `more` pairs are added to the
// timings so far (a[i], b[i] of pair i), even in the case most favourable to
// it: every added pair slower by any amount. When not, timing on is futile:
// the answer to "is B slower?" is already no, whatever those pairs show.
bool slowerReachable(const std::vector<double>& a, const std::vector<double>& b, size_t more, double margin,
                     int resamples = 400);

}  // namespace ptopt::measure
