// libFuzzer target: the IR text parser (ir::parseGraph), with and without
// known-operator checking (rule files parse patterns without it). Bad text
// throws ir::ParseError and nothing else; a graph that parses prints to text
// that parses back and prints identically (print -> parse -> print is the
// identity).
#include "ir/text.h"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 8192) return 0;
  ptopt::ir::ParseOptions options;
  options.requireKnownOperators = (data[0] & 1) != 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::unique_ptr<ptopt::ir::Graph> graph;
  try {
    graph = ptopt::ir::parseGraph(text, options);
  } catch (const ptopt::ir::ParseError&) {
    return 0;
  }
  std::string printed = ptopt::ir::printGraph(*graph);
  auto again = ptopt::ir::parseGraph(printed, options);  // must not throw
  if (ptopt::ir::printGraph(*again) != printed) std::abort();
  return 0;
}
