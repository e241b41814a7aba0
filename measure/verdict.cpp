#include "measure/verdict.h"

namespace ptopt::measure {

std::string verdictName(Verdict v) {
  switch (v) {
    case Verdict::Faster: return "faster";
    case Verdict::Slower: return "slower";
    case Verdict::NoClearDifference: break;
  }
  return "no clear difference";
}

Verdict judge(const RatioEstimate& r, double margin) {
  if (r.low > 1 + margin) return Verdict::Slower;
  if (r.high < 1 - margin) return Verdict::Faster;
  return Verdict::NoClearDifference;
}

bool couldStillBe(Verdict v, const RatioEstimate& r, double margin) {
  switch (v) {
    case Verdict::Faster: return r.low <= 1 - margin;
    case Verdict::Slower: return r.high >= 1 + margin;
    case Verdict::NoClearDifference: break;
  }
  return r.low <= 1 + margin && r.high >= 1 - margin;
}

bool verdictSettled(const RatioEstimate& r, double margin) {
  return judge(r, margin) != Verdict::NoClearDifference ||
         (!couldStillBe(Verdict::Faster, r, margin) && !couldStillBe(Verdict::Slower, r, margin));
}

bool slowerSettled(const RatioEstimate& r, double margin) {
  return judge(r, margin) == Verdict::Slower || !couldStillBe(Verdict::Slower, r, margin);
}

bool slowerReachable(const std::vector<double>& a, const std::vector<double>& b, size_t more, double margin,
                     int resamples) {
  // The case most favourable to Slower: in each added pair A takes its
  // median time so far and B a thousand times that, beyond every time seen.
  if (a.empty()) return true;
  std::vector<double> withA = a, withB = b;
  const double typicalA = percentile(a, 0.5);
  for (size_t i = 0; i < more; ++i) withA.push_back(typicalA), withB.push_back(1000.0 * typicalA);
  return judge(bootstrapMedianRatio(withA, withB, resamples), margin) == Verdict::Slower;
}

}  // namespace ptopt::measure
