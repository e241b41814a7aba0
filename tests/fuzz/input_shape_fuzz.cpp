// libFuzzer target: the --input-shape parser (verify::parseInputSpec). Bad
// text throws std::invalid_argument and nothing else (anything else would
// reach the CLI as an internal error, exit 1, instead of a usage error);
// a spec that parses prints (str()) to text that parses to the same spec.
#include "verify/inputs.h"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  ptopt::verify::InputSpec spec;
  try {
    spec = ptopt::verify::parseInputSpec(text);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  std::string printed = spec.str();
  ptopt::verify::InputSpec again = ptopt::verify::parseInputSpec(printed);  // must not throw
  if (again.str() != printed) std::abort();
  return 0;
}
