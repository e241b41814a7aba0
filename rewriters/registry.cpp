#include "rewriters/registry.h"

#include <algorithm>
#include <stdexcept>

namespace ptopt::rewriters {

void PassRegistry::add(PassFactory factory) {
  auto sample = factory();
  PassInfo info{sample->name(), sample->description(), sample->contract(), sample->optionSpecs(),
                std::move(factory)};
  if (passes_.count(info.name)) throw std::logic_error("pass '" + info.name + "' registered twice");
  passes_.emplace(info.name, std::move(info));
}

const PassInfo* PassRegistry::find(const std::string& name) const {
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : &it->second;
}

std::vector<const PassInfo*> PassRegistry::all() const {
  std::vector<const PassInfo*> out;
  for (const auto& [k, v] : passes_) out.push_back(&v);
  return out;
}

std::unique_ptr<Pass> PassRegistry::create(const std::string& name,
                                           const std::map<std::string, std::string>& options) const {
  const PassInfo* info = find(name);
  if (!info) throw std::invalid_argument("unknown pass '" + name + "'");
  auto pass = info->create();
  pass->configure(options);
  return pass;
}

// Optimal string alignment distance: insertions, deletions, substitutions
// and transpositions of neighbours (`nb` for `bn`) each cost one.
size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string PassRegistry::suggest(const std::string& name) const {
  std::string best;
  size_t bestDistance = std::max<size_t>(3, name.size() / 3) + 1;
  for (const auto& [k, v] : passes_) {
    size_t d = editDistance(name, k);
    if (d < bestDistance) { bestDistance = d; best = k; }
  }
  return best;
}

}  // namespace ptopt::rewriters
