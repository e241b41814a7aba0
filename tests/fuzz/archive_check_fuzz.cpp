// libFuzzer target: the zip pre-check (ir/archive_check.h) on arbitrary
// bytes. It must never read out of bounds (ASan), never hit undefined
// behaviour (UBSan), never throw: every input is either sound or gets a
// one-line problem. A sound archive's entries must lie inside the input.
#include "ir/archive_check.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ptopt::ir::ArchiveLimits limits;
  limits.maxInflatedEntryBytes = 64 << 20;  // keep each run fast
  auto result = ptopt::ir::checkZipArchive(bytes, limits);
  if (result.ok()) {
    if (result.entries.empty()) std::abort();
    for (const auto& e : result.entries)
      if (e.dataOffset > size || e.compressedSize > size - e.dataOffset || e.endOffset > size) std::abort();
  } else if (result.problem.find('\n') != std::string::npos) {
    std::abort();  // the reason is one line
  }
  return 0;
}
