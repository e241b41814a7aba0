// Statistics for `ptopt bench`: they live in the tune library (tune/stats.h),
// which the tuner shares; the names stay available here.
#pragma once

#include "tune/stats.h"

namespace ptopt::tools {

using tune::bootstrapMedianRatio;
using tune::kNoisyCv;
using tune::percentile;
using tune::RatioEstimate;
using tune::summarize;
using tune::TimingStats;

}  // namespace ptopt::tools
