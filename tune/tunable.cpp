#include "tune/tunable.h"

#include "ir/pt2.h"

#include "ir/op_views.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/script.h>

#include <stdexcept>

namespace ptopt::tune {

namespace {

// The registry's slot for the tunables (rewriters::PassRegistry::extensions).
struct RegisteredTunables {
  std::vector<std::shared_ptr<const Tunable>> list;
};

}  // namespace

Tunable elementTunable(std::string kind, std::string pass,
                       std::function<void(TuningSession&, const rewriters::PipelineElement&)> tune, Listing listing) {
  Tunable t;
  t.listing = {{kind, listing}};
  t.kind = std::move(kind);
  t.pass = std::move(pass);
  t.tuneElement = std::move(tune);
  return t;
}

void addTunable(rewriters::PassRegistry& registry, Tunable t) {
  if (t.kind.empty()) throw std::logic_error("a tunable needs a kind");
  const int kinds = int(t.offered()) + int(t.proposesPipelines()) + int(static_cast<bool>(t.tuneElement));
  if (kinds != 1)
    throw std::logic_error("tunable '" + t.kind +
                           "' must do one of: tune its pass's element, offer passes, propose pipelines");
  if (t.tunesElements() && t.pass.empty()) throw std::logic_error("tunable '" + t.kind + "' names no pass");
  auto& list = registry.extensions().getOrCreate<RegisteredTunables>().list;
  for (const auto& other : list) {
    if (other->kind == t.kind) throw std::logic_error("tunable '" + t.kind + "' registered twice");
    if (t.tunesElements() && other->tunesElements() && other->pass == t.pass)
      throw std::logic_error("two tunables tune the elements of pass '" + t.pass + "'");
  }
  list.push_back(std::make_shared<const Tunable>(std::move(t)));
}

std::vector<std::shared_ptr<const Tunable>> tunables(const rewriters::PassRegistry& registry) {
  const auto* found = registry.extensions().find<RegisteredTunables>();
  return found ? found->list : std::vector<std::shared_ptr<const Tunable>>{};
}

size_t convsAndLinears(const ir::Graph& graph) {
  size_t n = 0;
  graph.walk([&](const ir::Node* node) {
    if (ir::ConvOp::isConv(node) || node->is("aten::linear")) ++n;
  });
  return n;
}

Candidate boxedCandidate(std::string name, const std::string& op, const std::string& overload,
                         std::vector<c10::IValue> args) {
  auto handle = std::make_shared<c10::OperatorHandle>(
      c10::Dispatcher::singleton().findSchemaOrThrow(op.c_str(), overload.c_str()));
  auto fixed = std::make_shared<std::vector<c10::IValue>>(std::move(args));
  return {std::move(name), [handle, fixed] {
            torch::jit::Stack stack(fixed->begin(), fixed->end());
            handle->callBoxed(&stack);
          }};
}

std::vector<Candidate> wholeModelCandidates(const ModelVariants& models, const std::vector<c10::IValue>& inputs,
                                            c10::Device device, bool loadTimeOnce) {
  ir::ExportOptions options;
  options.hoistLoadTimeValues = loadTimeOnce;
  std::vector<c10::IValue> onDevice;
  for (const c10::IValue& v : inputs) onDevice.push_back(v.isTensor() ? c10::IValue(v.toTensor().to(device)) : v);
  auto shared = std::make_shared<std::vector<c10::IValue>>(std::move(onDevice));
  std::vector<Candidate> out;
  for (const auto& [name, model] : models) {
    // A program runs on its constants as the .pt2 stores them (contiguous):
    // a channels-last weight read back costs its convs another reorder.
    const ir::Model rendered = loadTimeOnce ? ir::Model() : ir::withConstantsAsStoredInPt2(*model);
    auto module = std::make_shared<torch::jit::Module>(
        ir::moduleOnDevice(ir::exportModel(loadTimeOnce ? *model : rendered, options), device));
    module->eval();
    out.push_back({name, [module, shared] { (void)module->forward(*shared); }});
  }
  return out;
}

}  // namespace ptopt::tune
