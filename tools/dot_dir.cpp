#include "tools/dot_dir.h"

#include "tools/commands.h"
#include "session/render.h"

#include <filesystem>
#include <fmt/format.h>

namespace ptopt::tools {

DotDirRecorder::DotDirRecorder(std::string dir, const ir::Graph& initial, std::string title)
    : dir_(std::move(dir)), extension_(session::graphvizAvailable() ? ".svg" : ".dot"), title_(std::move(title)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    throw UsageError("--dot-dir: cannot create folder '" + dir_ + "'");
  // Own copy of the constant table: later passes erase constants the
  // snapshot still reads. The one snapshot: the final drawing diffs the
  // whole pipeline against it.
  initial_ = ir::cloneGraph(initial, std::make_shared<ir::ConstantTable>(initial.constants()));
  options_.title = title_ + ": before";
  write("before", draw::writeDot(*initial_, options_));
}

std::string DotDirRecorder::write(const std::string& stem, const std::string& dot) {
  const std::string path = (std::filesystem::path(dir_) / fmt::format("{:02d}-{}{}", next_++, stem, extension_)).string();
  session::writeDrawing(dot, path);
  written_.push_back(path);
  return path;
}

void DotDirRecorder::afterPass(const rewriters::PassExecution& execution, const ir::Graph& graph) {
  if (!execution.changed || execution.method != "forward") return;
  draw::DotOptions options = options_;
  options.title = fmt::format("{}: after {} (execution {}) {}", title_, execution.pass, execution.index,
                              execution.result.countersText());
  const ir::ChangeSet none;
  const ir::ChangeSet& changes = execution.changes ? *execution.changes : none;
  if (execution.edits == 0)
    options.notes.push_back("the pass edited the graph without logging its edits: its changes are not marked");
  write("after-" + execution.pass, draw::writeDotChanges(graph, changes, options));
}

std::string DotDirRecorder::finish(const ir::Graph& final) {
  options_.title = title_ + ": after the whole pipeline";
  write("after", draw::writeDotDiff(*initial_, final, options_));
  return fmt::format("drawings: {} files in {}{}\n", written_.size(), dir_,
                     session::graphvizAvailable() ? "" : " (.dot: this ptopt was built without GraphViz; render with `dot -Tsvg`)");
}

}  // namespace ptopt::tools
