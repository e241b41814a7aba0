// `ptopt dot`: GraphViz drawings of a model, or of the difference between two.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace ptopt::tools {

struct DotCommandOptions {
  std::string input;
  std::string output;        // .dot/.gv (text), .svg/.png/.pdf (GraphViz builds); empty: DOT to stdout
  std::string diffWith;      // --diff OTHER.pt
  std::string afterPipeline; // --after PIPELINE|-O1: diff against the model after a pipeline
  std::string method = "forward";
  std::string colorBy = "op";
  int depth = -1;
  size_t maxNodes = 500;
  bool showConstants = false;
  bool noClusters = false;
  bool noLegend = false;
  std::vector<std::string> inputShapes;
};
void registerDotOptions(CLI::App& cmd, DotCommandOptions& o);
int runDot(const DotCommandOptions& o);

}  // namespace ptopt::tools
