#include "session/render.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>

#ifdef PTOPT_WITH_GRAPHVIZ
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#endif

namespace ptopt::session {

bool graphvizAvailable() {
#ifdef PTOPT_WITH_GRAPHVIZ
  return true;
#else
  return false;
#endif
}

std::string formatForPath(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext.size() < 2) throw DrawingError("cannot tell the drawing format of '" + path + "': give it an extension (.dot, .svg, .png)");
  ext = ext.substr(1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == "gv" ? "dot" : ext;
}

namespace {
void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw DrawingError("cannot write '" + path + "'");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw DrawingError("cannot write '" + path + "'");
}
}  // namespace

#ifdef PTOPT_WITH_GRAPHVIZ
namespace {
// GraphViz reports problems (a malformed HTML label, after which it drops the
// label and draws on) through this hook instead of stderr.
std::string graphvizErrors;
int collectGraphvizError(char* message) {
  graphvizErrors += message;
  return 0;
}
}  // namespace

std::string renderDot(const std::string& dot, const std::string& format) {
  // One context for the process: gvContext loads the plugin configuration,
  // which is slow, and GraphViz is not thread-safe anyway.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  static GVC_t* gvc = gvContext();
  if (!gvc) throw std::runtime_error("GraphViz: cannot create a context");
  agseterrf(collectGraphvizError);
  graphvizErrors.clear();
  Agraph_t* g = agmemread(dot.c_str());
  if (!g) throw std::runtime_error("GraphViz cannot read the generated DOT text");
  if (gvLayout(gvc, g, "dot") != 0) {
    agclose(g);
    throw std::runtime_error("GraphViz layout failed");
  }
  char* data = nullptr;
  unsigned int length = 0;
  const int rc = gvRenderData(gvc, g, format.c_str(), &data, &length);
  std::string bytes = rc == 0 && data ? std::string(data, length) : std::string();
  if (data) gvFreeRenderData(data);
  gvFreeLayout(gvc, g);
  agclose(g);
  if (rc != 0)
    throw DrawingError("GraphViz cannot render format '" + format + "' (try .svg, .png or .pdf; or write .dot)");
  if (graphvizErrors.find("Error") != std::string::npos)
    throw std::runtime_error("GraphViz rejected part of the drawing (a ptopt bug; the .dot output still works): " +
                             graphvizErrors);
  return bytes;
}
#else
std::string renderDot(const std::string&, const std::string& format) {
  throw DrawingError("this ptopt was built without GraphViz, so it cannot write ." + format +
                   "; write .dot and run `dot -T" + format + " G.dot -o G." + format + "`");
}
#endif

void writeDrawing(const std::string& dot, const std::string& path) {
  const std::string format = formatForPath(path);
  writeFile(path, format == "dot" ? dot : renderDot(dot, format));
}

}  // namespace ptopt::session
