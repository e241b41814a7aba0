#include "ir/model.h"

#include <unordered_map>

namespace ptopt::ir {

namespace {

class GraphCloner {
 public:
  explicit GraphCloner(Graph& dst) : dst_(dst) {}

  void cloneBlock(const Block& src, Block& dst) {
    Builder builder(&dst);
    for (const Node* n : src) {
      if (n->opcode() == Opcode::Placeholder) {
        Value* v = dst_.addInput(n->output()->type(), n->output()->name());
        v->meta() = n->output()->meta();
        for (const auto& [name, value] : n->attrs()) v->node()->setAttr(name, value);
        map_[n->output()] = v;
        continue;
      }
      if (n->opcode() == Opcode::Output) {
        for (const Arg& a : n->args()) dst.outputNode()->addArg(mapArg(a));
        continue;
      }
      Node* copy = dst_.createNode(n->opcode(), n->target(), n->overload());
      copy->setSchema(n->schema());
      copy->setScope(n->scope());
      copy->setSourceLocation(n->sourceLocation());
      copy->setProvenance(n->provenance());
      for (const auto& [k, v] : n->attrs()) copy->setAttr(k, v);
      for (const Arg& a : n->args()) copy->addArg(mapArg(a));
      for (const auto& out : n->outputs()) {
        Value* v = copy->addOutput(out->type(), out->name());
        v->meta() = out->meta();
        map_[out.get()] = v;
      }
      builder.insert(copy);
      for (const auto& nested : n->blocks()) {
        Block* b = copy->addBlock();
        for (const auto& p : nested->params()) {
          Value* v = b->addParam(p->type(), p->name());
          v->meta() = p->meta();
          map_[p.get()] = v;
        }
        cloneBlock(*nested, *b);
      }
    }
  }

 private:
  Arg mapArg(const Arg& a) { return a.isValue() ? Arg(map_.at(a.value())) : a; }
  Graph& dst_;
  std::unordered_map<const Value*, Value*> map_;
};

}  // namespace

std::unique_ptr<Graph> cloneGraph(const Graph& g, std::shared_ptr<ConstantTable> constants) {
  auto out = std::make_unique<Graph>(constants ? std::move(constants) : g.sharedConstants());
  out->namedTypes() = g.namedTypes();
  GraphCloner(*out).cloneBlock(*g.block(), *out->block());
  return out;
}

Graph& Model::forward() const {
  Graph* g = method("forward");
  if (!g) throw std::logic_error("model has no forward method");
  return *g;
}

Graph* Model::method(const std::string& name) const {
  for (const auto& [n, g] : methods)
    if (n == name) return g.get();
  return nullptr;
}

Model Model::clone() const {
  Model copy;
  copy.constants = std::make_shared<ConstantTable>(*constants);
  for (const auto& [name, g] : methods) {
    copy.methods.emplace_back(name, cloneGraph(*g, copy.constants));
  }
  return copy;
}

}  // namespace ptopt::ir
