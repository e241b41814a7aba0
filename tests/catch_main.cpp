#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/support/cpu_cap.h"

#include <iostream>

int main(int argc, char* argv[]) {
  // A CPU capped by environment variables behaves like the real one.
  if (const std::string note = ptopt::test::followCpuCap(); !note.empty()) std::cerr << note << "\n";
  return Catch::Session().run(argc, argv);
}
