#include "driver/op_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <vector>

namespace ptopt::driver {

std::map<std::string, size_t> countOps(const ir::Graph& g) {
  std::map<std::string, size_t> counts;
  g.walk([&](ir::Node* n) {
    if (n->isCall()) ++counts[n->target()];
  });
  return counts;
}

std::string formatOpTable(const std::map<std::string, size_t>& before,
                          const std::map<std::string, size_t>* after, bool colour) {
  std::set<std::string> names;
  for (const auto& [k, v] : before) names.insert(k);
  if (after) for (const auto& [k, v] : *after) names.insert(k);
  auto get = [](const std::map<std::string, size_t>* m, const std::string& k) -> size_t {
    if (!m) return 0;
    auto it = m->find(k);
    return it == m->end() ? 0 : it->second;
  };
  std::vector<std::string> rows(names.begin(), names.end());
  std::stable_sort(rows.begin(), rows.end(), [&](const std::string& a, const std::string& b) {
    const size_t ka = std::max(get(&before, a), get(after, a)), kb = std::max(get(&before, b), get(after, b));
    return ka != kb ? ka > kb : a < b;
  });
  size_t width = 8;
  for (const auto& r : rows) width = std::max(width, r.size());
  std::string out;
  size_t totalBefore = 0, totalAfter = 0;
  if (after) out += fmt::format("  {:<{}}  {:>7}  {:>7}\n", "op", width, "before", "after");
  else out += fmt::format("  {:<{}}  {:>7}\n", "op", width, "count");
  for (const auto& r : rows) {
    const size_t b = get(&before, r), a = get(after, r);
    totalBefore += b;
    totalAfter += a;
    if (after) {
      const bool changed = a != b;
      out += fmt::format("{}{} {:<{}}  {:>7}  {:>7}{}\n", changed && colour ? "\033[33m" : "", changed ? "*" : " ", r,
                         width, b, a, changed && colour ? "\033[0m" : "");
    }
    else out += fmt::format("  {:<{}}  {:>7}\n", r, width, b);
  }
  if (after) out += fmt::format("  {:<{}}  {:>7}  {:>7}\n", "total", width, totalBefore, totalAfter);
  else out += fmt::format("  {:<{}}  {:>7}\n", "total", width, totalBefore);
  return out;
}

}  // namespace ptopt::driver

namespace ptopt::driver {

namespace {

size_t tensorBytesIn(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().nbytes();
  size_t n = 0;
  if (v.isTuple())
    for (const auto& e : v.toTupleRef().elements()) n += tensorBytesIn(e);
  if (v.isList())
    for (const auto& e : v.toListRef()) n += tensorBytesIn(e);
  return n;
}

// The tensors an object serializes (its __getstate__: a custom class such
// as the quantized engines' packed weights); 0 when it has none.
size_t objectTensorBytes(const c10::IValue& v) {
  try {
    auto obj = v.toObject();
    if (auto* getstate = obj->type()->findMethod("__getstate__")) return tensorBytesIn((*getstate)({v}));
  } catch (const std::exception&) {
  }
  return 0;
}

}  // namespace

size_t parameterBytes(const ir::Model& model) {
  std::set<std::string> used;
  for (const auto& [name, graph] : model.methods)
    graph->walk([&](ir::Node* n) {
      if (n->opcode() == ir::Opcode::GetAttr) used.insert(n->target());
    });
  size_t bytes = 0;
  for (const auto& name : used) {
    if (!model.constants->contains(name)) continue;
    const c10::IValue& v = model.constants->at(name);
    if (v.isTensor()) bytes += v.toTensor().nbytes();
    else if (v.isObject()) bytes += objectTensorBytes(v);  // int8 packed weights (quantize)
  }
  return bytes;
}

}  // namespace ptopt::driver
