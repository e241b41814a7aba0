// .pt2 in a PyTorch 1.13 build: torch.export does not exist there, so every
// entry point says so (see pt2.h).
#include "ir/pt2.h"

#include <stdexcept>

namespace ptopt::ir {

bool pt2Supported() { return false; }
std::pair<int, int> pt2SchemaVersion() { return {0, 0}; }

std::string pt2UnsupportedMessage(const std::string& what) {
  return "this ptopt is built against PyTorch " TORCH_VERSION ", which has no torch.export; to " + what +
         " .pt2 programs, build it against PyTorch 2.x (./scripts/setup-torch2.sh && ./scripts/build.sh --world "
         "torch2, or pip install . into a PyTorch 2.x environment)";
}

Pt2ReadResult readPt2(const std::string&, const std::string& where) {
  throw InputError("'" + where + "' is a torch.export program (.pt2): " + pt2UnsupportedMessage("read"));
}
Pt2ReadResult readPt2File(const std::string& path) { return readPt2("", path); }

std::string writePt2(const Model&, const std::vector<c10::IValue>&, const Pt2Program*, std::vector<std::string>*) {
  throw std::invalid_argument(pt2UnsupportedMessage("write"));
}

std::vector<c10::IValue> inputsFromMeta(const Graph&) { throw std::invalid_argument(pt2UnsupportedMessage("write")); }

}  // namespace ptopt::ir
