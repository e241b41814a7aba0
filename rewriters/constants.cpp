#include "rewriters/constants.h"

#include "ir/mutation.h"

namespace ptopt::rewriters {

std::optional<at::Tensor> constantTensor(const ir::Value* v) {
  if (!v || !v->node() || v->node()->opcode() != ir::Opcode::GetAttr) return std::nullopt;
  const auto& table = v->graph().constants();
  if (!table.contains(v->node()->target())) return std::nullopt;
  const c10::IValue& iv = table.at(v->node()->target());
  if (!iv.isTensor()) return std::nullopt;
  return iv.toTensor();
}

std::optional<at::Tensor> constantTensorArg(const ir::Node* n, size_t i) {
  if (i >= n->numArgs() || !n->arg(i).isValue()) return std::nullopt;
  return constantTensor(n->arg(i).value());
}

bool isWrittenAnywhere(const ir::Value* v) { return ir::anyUseMayWrite(v); }

size_t valueUses(const ir::Value* v) {
  static const char* kMetadataOnly[] = {"aten::dim", "aten::size", "aten::numel", "prim::device", "prim::dtype",
                                        "aten::is_floating_point", "prim::layout"};
  size_t count = 0;
  for (const ir::Use& u : v->uses()) {
    bool metadataOnly = false;
    for (const char* t : kMetadataOnly) metadataOnly = metadataOnly || u.user->is(t);
    count += !metadataOnly;
  }
  return count;
}

std::string modulePrefix(const std::string& constantName) {
  const auto dot = constantName.rfind('.');
  return dot == std::string::npos ? constantName : constantName.substr(0, dot);
}

}  // namespace ptopt::rewriters
