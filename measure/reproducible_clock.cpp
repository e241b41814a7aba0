#include "measure/reproducible_clock.h"

#include <cstdint>
#include <cstdlib>

namespace ptopt::measure {

double ReproducibleClock::msFor(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bits
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return 1.0 + static_cast<double>(h % 1000) / 1000.0;
}

double ReproducibleClock::timeMs(const Subject& s, int calls) {
  s.run();
  const double ms = msFor(s.name);
  elapsedMs_ += ms * (calls > 0 ? calls : 1);
  return ms;
}

}  // namespace ptopt::measure
