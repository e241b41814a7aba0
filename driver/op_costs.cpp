#include "driver/op_costs.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <vector>

namespace ptopt::driver {

namespace {

using Clock = std::chrono::steady_clock;

// The collector the callbacks of this thread write into while timeOpKinds
// runs (RecordFunction callbacks are plain function pointers).
struct Collector {
  OpKindCosts costs;
  int depth = 0;
};
thread_local Collector* tCollector = nullptr;

struct Started : at::ObserverContext {
  Clock::time_point start;
  bool outermost = false;
};

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction&) {
  auto ctx = std::make_unique<Started>();
  if (tCollector) ctx->outermost = tCollector->depth++ == 0;
  ctx->start = Clock::now();
  return ctx;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* raw) {
  const auto end = Clock::now();
  auto* ctx = static_cast<Started*>(raw);
  if (!tCollector || !ctx) return;
  --tCollector->depth;
  if (!ctx->outermost) return;
  OpKindCost& c = tCollector->costs[fn.name()];
  ++c.calls;
  c.ms += std::chrono::duration<double, std::milli>(end - ctx->start).count();
}

// Installs the callback on this thread for its lifetime.
class ScopedCollector {
 public:
  explicit ScopedCollector(Collector& c) : previous_(tCollector) {
    tCollector = &c;
    if (!previous_)  // one callback per thread; a nested collector takes it over
      handle_ = at::addThreadLocalCallback(
          at::RecordFunctionCallback(onStart, onEnd).scopes({at::RecordScope::FUNCTION}));
  }
  ~ScopedCollector() {
    if (!previous_) at::removeCallback(handle_);
    tCollector = previous_;
  }
  ScopedCollector(const ScopedCollector&) = delete;
  ScopedCollector& operator=(const ScopedCollector&) = delete;

 private:
  Collector* previous_;
  at::CallbackHandle handle_ = 0;
};

bool isBoundary(const torch::jit::Node* n) {
  const std::string kind = n->kind().toQualString();
  return kind == "aten::quantize_per_tensor" || kind == "aten::quantize_per_channel" || kind == "aten::dequantize";
}

// The op that reads or produces a boundary; a list or tuple a dequantized
// value is put into is followed to its readers (a float cat).
void countNeighbour(const torch::jit::Node* n, std::map<std::string, size_t>& out, bool reader) {
  const std::string kind = n->kind().toQualString();
  if (reader && (kind == "prim::ListConstruct" || kind == "prim::TupleConstruct")) {
    for (const torch::jit::Use& u : n->output()->uses()) countNeighbour(u.user, out, true);
    return;
  }
  if (kind.rfind("prim::", 0) == 0 || isBoundary(n)) return;
  if (kind.rfind("quantized::", 0) == 0) return;  // the int8 side
  ++out[kind];
}

}  // namespace

OpKindCosts timeOpKinds(torch::jit::Module module, const std::vector<c10::IValue>& inputs, int runs) {
  module.eval();
  torch::NoGradGuard noGrad;
  module.forward(inputs);  // warm-up: packs, caches, allocations
  Collector c;
  {
    ScopedCollector scoped(c);
    for (int i = 0; i < runs; ++i) module.forward(inputs);
  }
  for (auto& [name, cost] : c.costs) {
    cost.calls /= static_cast<size_t>(std::max(1, runs));
    cost.ms /= std::max(1, runs);
  }
  return c.costs;
}

std::map<std::string, size_t> precisionBoundaries(const torch::jit::Module& module) {
  std::map<std::string, size_t> out;
  auto graph = module.get_method("forward").graph();
  for (const torch::jit::Node* n : graph->nodes()) {
    if (!isBoundary(n)) continue;
    const std::string kind = n->kind().toQualString();
    if (kind == "aten::dequantize") {
      for (const torch::jit::Use& u : n->output()->uses()) countNeighbour(u.user, out, true);
    }
    if (kind != "aten::dequantize" && !n->inputs().empty()) countNeighbour(n->input(0)->node(), out, false);
  }
  return out;
}

bool hasQuantizedOps(const torch::jit::Graph& graph) {
  for (const torch::jit::Node* n : graph.nodes()) {
    const std::string ns = n->kind().ns().toUnqualString();
    if (ns == "quantized" || ns == "onednn") return true;
  }
  return false;
}

std::vector<std::string> lossLines(const OpKindCosts& in, const OpKindCosts& out,
                                   const std::map<std::string, size_t>& boundaries, size_t top) {
  std::set<std::string> names;
  for (const auto& [name, cost] : in) names.insert(name);
  for (const auto& [name, cost] : out) names.insert(name);
  struct Row {
    std::string name;
    OpKindCost in, out;
    double growth() const { return out.ms - in.ms; }
  };
  std::vector<Row> rows;
  double totalIn = 0, totalOut = 0;
  for (const std::string& name : names) {
    Row r{name, {}, {}};
    if (auto it = in.find(name); it != in.end()) r.in = it->second;
    if (auto it = out.find(name); it != out.end()) r.out = it->second;
    totalIn += r.in.ms;
    totalOut += r.out.ms;
    rows.push_back(r);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.growth() > b.growth(); });
  std::vector<std::string> lines;
  lines.push_back(fmt::format("where OUT's time went, ms per inference in its ops ({:.2f} ms in OUT's, {:.2f} in IN's):",
                              totalOut, totalIn));
  lines.push_back(fmt::format("  {:<36} {:>10} {:>10}", "op", "OUT", "IN"));
  auto cell = [](const OpKindCost& c) { return c.calls ? fmt::format("{}x {:.2f}", c.calls, c.ms) : std::string("-"); };
  auto line = [&](const Row& r) { return fmt::format("  {:<36} {:>10} {:>10}", r.name, cell(r.out), cell(r.in)); };
  for (size_t i = 0; i < rows.size() && i < top && rows[i].growth() > 0; ++i) lines.push_back(line(rows[i]));
  // Then what those replaced: IN's op kinds that OUT no longer calls.
  std::vector<Row> gone;
  for (const Row& r : rows)
    if (!r.out.calls && r.in.calls) gone.push_back(r);
  std::stable_sort(gone.begin(), gone.end(), [](const Row& a, const Row& b) { return a.in.ms > b.in.ms; });
  for (size_t i = 0; i < gone.size() && i < 3; ++i) lines.push_back(line(gone[i]));
  if (!boundaries.empty()) {
    std::vector<std::pair<std::string, size_t>> forced(boundaries.begin(), boundaries.end());
    std::stable_sort(forced.begin(), forced.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string text;
    for (const auto& [kind, count] : forced) text += (text.empty() ? "" : ", ") + fmt::format("{} ({})", kind, count);
    lines.push_back("the precision conversions sit at these ops, which run in float32 here: " + text);
  }
  return lines;
}

}  // namespace ptopt::driver
