// libFuzzer target: the pipeline parser (rewriters::parsePipeline) with every
// registered pass. Bad text throws PipelineError and nothing else; a
// pipeline that parses prints canonically, and the printed text parses back
// to the same canonical text.
#include "rewriters/pipeline.h"
#include "api/api.h"

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const auto& registry = ptopt::defaultRegistry();
  std::string text(reinterpret_cast<const char*>(data), size);
  ptopt::rewriters::Pipeline pipeline;
  try {
    pipeline = ptopt::rewriters::parsePipeline(text, registry, "fuzz");
  } catch (const ptopt::rewriters::PipelineError&) {
    return 0;
  }
  std::string printed = ptopt::rewriters::printPipeline(pipeline);
  auto again = ptopt::rewriters::parsePipeline(printed, registry, "printed");  // must not throw
  if (ptopt::rewriters::printPipeline(again) != printed) std::abort();
  return 0;
}
