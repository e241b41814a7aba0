// Text printer for the IR (the format is described in text.h).
#include "ir/text.h"

#include "ir/rewriter.h"

#include <sstream>

namespace ptopt::ir {
namespace {

std::string printMeta(const TensorMeta& m) {
  if (m.empty()) return "";
  std::vector<std::string> parts;
  if (m.dtype) parts.push_back(dtypeName(*m.dtype));
  if (m.shape) parts.push_back(Literal(*m.shape).str() == "int[]" ? "[]" : Literal(*m.shape).str());
  if (m.memoryFormat) parts.push_back(memoryFormatName(*m.memoryFormat));
  if (m.device) parts.push_back(m.device->str());
  std::string out = "{";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out + "}";
}

}  // namespace

std::string printValueDecl(const Value& v) {
  return "%" + v.name() + " : " + printType(v.type()) + printMeta(v.meta());
}

namespace {

std::string printAttr(const AttrValue& a) {
  if (const auto* lit = std::get_if<Literal>(&a)) return lit->str();
  const auto& types = std::get<TypesAttr>(a);
  std::string out = types.isList ? "types(" : "type(";
  for (size_t i = 0; i < types.types.size(); ++i)
    out += (i ? ", " : "") + printType(types.types[i]);
  return out + ")";
}

void printBlock(std::ostringstream& os, const Block& b, int indent) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  for (const Node* n : b) {
    if (n->opcode() == Opcode::Placeholder) continue;  // in the signature
    os << pad << printNode(*n) << "\n";
    for (size_t i = 0; i < n->blocks().size(); ++i) {
      const Block& nested = *n->block(i);
      os << pad << "  block" << i << "(";
      for (size_t p = 0; p < nested.params().size(); ++p)
        os << (p ? ", " : "") << printValueDecl(*nested.param(p));
      os << "):\n";
      printBlock(os, nested, indent + 4);
    }
  }
}

}  // namespace

std::string printType(const c10::TypePtr& t) { return t ? t->annotation_str() : "Any"; }

std::string printNode(const Node& n) {
  std::string out;
  for (size_t i = 0; i < n.numOutputs(); ++i) out += (i ? ", " : "") + printValueDecl(*n.output(i));
  if (n.numOutputs()) out += " = ";
  switch (n.opcode()) {
    case Opcode::Placeholder: return "placeholder " + out;
    case Opcode::GetAttr: return out + "get_attr[" + quoteString(n.target()) + "]";
    case Opcode::Output: out += "output"; break;
    case Opcode::CallFunction:
      out += n.qualifiedTarget();
      if (!n.attrs().empty()) {
        out += "[";
        for (size_t i = 0; i < n.attrs().size(); ++i)
          out += (i ? ", " : "") + n.attrs()[i].first + "=" + printAttr(n.attrs()[i].second);
        out += "]";
      }
      break;
  }
  out += "(";
  for (size_t i = 0; i < n.numArgs(); ++i) out += (i ? ", " : "") + n.arg(i).str();
  return out + ")";
}

std::string printSignature(const Graph& g) {
  std::string out = "graph(";
  const auto inputs = g.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) out += (i ? ", " : "") + printValueDecl(*inputs[i]);
  return out + "):";
}

std::vector<std::string> printNodeLines(const Node& n, int indent, bool nested) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  std::vector<std::string> lines{pad + printNode(n)};
  for (size_t i = 0; i < n.blocks().size(); ++i) {
    const Block& b = *n.block(i);
    std::string header = pad + "  block" + std::to_string(i) + "(";
    for (size_t p = 0; p < b.params().size(); ++p) header += (p ? ", " : "") + printValueDecl(*b.param(p));
    lines.push_back(header + "):");
    if (!nested) continue;
    for (const Node* inner : b) {
      if (inner->opcode() == Opcode::Placeholder) continue;
      for (std::string& l : printNodeLines(*inner, indent + 4, true)) lines.push_back(std::move(l));
    }
  }
  return lines;
}

int textIndent(const Node& n) {
  int indent = 2;
  for (const Block* b = n.owningBlock(); b && b->owningNode(); b = b->owningNode()->owningBlock()) indent += 4;
  return indent;
}

std::string printGraph(const Graph& g) {
  std::ostringstream os;
  os << printSignature(g) << "\n";
  printBlock(os, *g.block(), 2);
  return os.str();
}

}  // namespace ptopt::ir
