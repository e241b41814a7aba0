// Renders DOT text to an image in-process with GraphViz's gvc/cgraph
// libraries (layout "dot"). Optional at build time (CMake option
// PTOPT_WITH_GRAPHVIZ): without it only `.dot` / `.gv` files can be written.
// Shared by `ptopt dot`, `--dot-dir` and ptopt.draw in Python.
#pragma once

#include <stdexcept>
#include <string>

namespace ptopt::session {

// A drawing that cannot be written as asked: no or an unknown format, no
// GraphViz in this build, a path that cannot be written. The command line
// answers it with exit code 2; Python raises it as RuntimeError.
class DrawingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether this ptopt was built with the GraphViz libraries.
bool graphvizAvailable();

// The output format a path asks for: "dot" for .dot/.gv, else the extension
// ("svg", "png", "pdf"). Throws DrawingError for a path without extension.
std::string formatForPath(const std::string& path);

// Writes `dot` to `path`: as text for .dot/.gv, else laid out and rendered in
// the format its extension names. Throws DrawingError when the format needs
// GraphViz and this build has none, or GraphViz does not know the format;
// std::runtime_error when GraphViz cannot read or lay out the text.
void writeDrawing(const std::string& dot, const std::string& path);

// Renders `dot` in `format` ("svg", "png", ...) to bytes (GraphViz builds only).
std::string renderDot(const std::string& dot, const std::string& format);

}  // namespace ptopt::session
