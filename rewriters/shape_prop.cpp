#include "rewriters/shape_prop.h"

#include "ir/interpreter.h"

#include <unordered_map>

namespace ptopt::rewriters {

namespace {

// Every value of the graph that can carry metadata, in program order.
std::vector<ir::Value*> allValues(const ir::Graph& g) {
  std::vector<ir::Value*> values;
  g.walk([&](ir::Node* n) {
    for (const auto& out : n->outputs()) values.push_back(out.get());
    for (const auto& b : n->blocks())
      for (const auto& p : b->params()) values.push_back(p.get());
  });
  return values;
}

}  // namespace

PassResult ShapePropPass::run(ir::Graph& graph, PassContext& ctx) {
  ir::Node* where = graph.block()->outputNode();
  if (!ctx.exampleInputs) {
    ctx.decline(name(), where,
                "no example inputs to run the graph on (give --input-shape, or set "
                "PassContext::exampleInputs)");
    return unchanged();
  }
  const size_t expected = graph.inputs().size();
  if (ctx.exampleInputs->size() != expected) {
    ctx.decline(name(), where,
                "the graph takes " + std::to_string(expected) + " inputs but " +
                    std::to_string(ctx.exampleInputs->size()) + " example inputs were given");
    return unchanged();
  }

  std::unordered_map<const ir::Value*, ir::TensorMeta> recorded;
  ir::InterpreterOptions options;
  options.observer = [&](const ir::Value& v, const c10::IValue& iv) {
    if (iv.isTensor()) recorded[&v] = ir::metaOf(iv.toTensor());
    else recorded.erase(&v);
  };
  std::vector<c10::IValue> inputs;
  for (const auto& iv : *ctx.exampleInputs) inputs.push_back(iv.deepcopy());  // in-place ops stay local
  try {
    ir::Interpreter(graph, options).run(std::move(inputs));
  } catch (const ir::InterpreterError& e) {
    throw PassError("cannot run the graph on the example inputs: " + std::string(e.what()));
  }

  PassResult r;
  ir::Rewriter rw(graph, ctx.edits, name());
  int64_t annotated = 0;
  const ir::TensorMeta none;
  for (ir::Value* v : allValues(graph)) {
    auto it = recorded.find(v);
    const ir::TensorMeta& meta = it == recorded.end() ? none : it->second;
    rw.setMeta(v, meta);  // logged only when it differs
    if (!meta.empty()) ++annotated;
  }
  r.changed = rw.changed();
  r.count("annotated", annotated);
  return r;
}

}  // namespace ptopt::rewriters
