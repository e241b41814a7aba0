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

}  // namespace ptopt::measure
