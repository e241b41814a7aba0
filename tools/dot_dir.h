// `ptopt IN OUT --dot-dir DIR`: drawings of the forward graph as the
// pipeline runs. DIR/00-before.svg is the imported graph; after every pass
// execution that changed the graph comes NN-after-<pass>.svg, drawn from the
// pass's edit log (draw/writer.h writeDotChanges: added green, changed
// yellow, removed dashed grey); the last, NN-after.svg, is the diff of the
// whole pipeline against the graph as loaded (draw/matcher.h pairs the two).
// The pass manager must fill PassExecution::changes
// (Instrumentation::wantChanges). Without GraphViz in the build the files are
// .dot text instead.
#pragma once

#include "draw/writer.h"
#include "rewriters/pass_manager.h"

#include <memory>
#include <string>
#include <vector>

namespace ptopt::tools {

class DotDirRecorder {
 public:
  // Creates `dir` (UsageError when it cannot) and draws 00-before.
  DotDirRecorder(std::string dir, const ir::Graph& initial, std::string title);
  // For Instrumentation::onPassEnd.
  void afterPass(const rewriters::PassExecution& execution, const ir::Graph& graph);
  // Draws the whole pipeline's diff; returns a one-line summary.
  std::string finish(const ir::Graph& final);

 private:
  std::string write(const std::string& stem, const std::string& dot);

  std::string dir_;
  std::string extension_;
  std::string title_;
  draw::DotOptions options_;
  size_t next_ = 0;
  std::unique_ptr<ir::Graph> initial_;
  std::vector<std::string> written_;
};

}  // namespace ptopt::tools
