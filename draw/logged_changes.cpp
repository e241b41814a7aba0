#include "draw/logged_changes.h"

#include "draw/labels.h"
#include "ir/text.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>

namespace ptopt::draw {

using ir::Block;
using ir::Graph;
using ir::Node;
using ir::Opcode;
using ir::Value;

LineNames namesOfLine(const std::string& line) {
  LineNames out;
  auto nameChar = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; };
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i)
        if (line[i] == '\\') ++i;
      continue;
    }
    if (line[i] != '%') continue;
    size_t end = i + 1;
    while (end < line.size() && nameChar(line[end])) ++end;
    const std::string name = line.substr(i + 1, end - i - 1);
    size_t next = end;
    while (next < line.size() && line[next] == ' ') ++next;
    // A declaration has its type after a colon; a use does not.
    if (!name.empty()) (next < line.size() && line[next] == ':' ? out.defs : out.refs).push_back(name);
    i = end - 1;
  }
  return out;
}

std::string opOfLine(const std::string& line) {
  size_t start = line.find(" = ");
  start = start == std::string::npos ? line.find_first_not_of(' ') : start + 3;
  if (start == std::string::npos) return "?";
  const size_t end = line.find_first_of("([", start);
  std::string op = line.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (const size_t colon = op.rfind("::"); colon != std::string::npos) op = op.substr(colon + 2);
  if (const size_t dot = op.find('.'); dot != std::string::npos) op = op.substr(0, dot);
  return op;
}

LoggedChanges::LoggedChanges(const Graph& g, const ir::ChangeSet& cs) : g_(g), cs_(cs) {
  g.walk([&](Node* n) {
    live_.insert(n);
    for (const auto& o : n->outputs()) names_.emplace(o->name(), o.get());
    for (const auto& b : n->blocks())
      for (const auto& p : b->params()) names_.emplace(p->name(), p.get());
  });
  // Removed get_attrs by output name: they define constants that other
  // removed nodes read.
  for (const auto& r : cs.removed) {
    const std::vector<std::string> lines = splitLines(r.text);
    if (lines.size() == 1 && lines[0].find("= get_attr[") != std::string::npos)
      for (const std::string& d : namesOfLine(lines[0]).defs) removedGetAttrs_.emplace(d, lines[0]);
  }
  for (const auto& r : cs.removed) {
    Removed out;
    const std::vector<std::string> lines = splitLines(r.text);
    // An erased graph input: the signature line; its name may still be read.
    if (!lines.empty() && lines[0].rfind("graph(", 0) == 0) continue;
    out.firstLine = lines.empty() ? "" : lines[0];
    out.names = namesOfLine(out.firstLine);
    out.anchor = r.anchor && live_.count(r.anchor) ? r.anchor : nullptr;
    if (const Node* top = parse(lines)) {
      out.node = top;
      std::function<void(const Node*)> add = [&](const Node* n) {
        out.tree.push_back(n);
        for (const auto& b : n->blocks())
          for (const Node* inner : *b) add(inner);
      };
      add(top);
    }
    removed.push_back(std::move(out));
  }
  for (const auto& [node, text] : cs.changed) {
    if (!live_.count(node)) continue;
    const std::vector<std::string> lines = splitLines(text);
    if (lines.empty()) continue;
    Old old;
    old.names = namesOfLine(lines[0]);
    old.node = parse({lines[0]});
    old_.emplace(node, std::move(old));
  }
}

const Node* LoggedChanges::parse(const std::vector<std::string>& lines) {
  if (lines.empty()) return nullptr;
  const size_t base = lines[0].find_first_not_of(' ');
  if (base == std::string::npos) return nullptr;
  std::set<std::string> defined;
  std::vector<std::string> reads;
  for (const std::string& l : lines) {
    const LineNames n = namesOfLine(l);
    defined.insert(n.defs.begin(), n.defs.end());
    for (const std::string& r : n.refs)
      if (std::find(reads.begin(), reads.end(), r) == reads.end()) reads.push_back(r);
  }
  std::string params, preamble;
  for (const std::string& name : reads) {
    if (defined.count(name)) continue;
    auto live = names_.find(name);
    const Value* v = live == names_.end() ? nullptr : live->second;
    if (v && v->node() && v->node()->opcode() == Opcode::GetAttr) {
      preamble += "  " + ir::printValueDecl(*v) + " = get_attr[" + ir::quoteString(v->node()->target()) + "]\n";
    } else if (v) {
      params += (params.empty() ? "" : ", ") + ir::printValueDecl(*v);
    } else if (auto ga = removedGetAttrs_.find(name); ga != removedGetAttrs_.end()) {
      preamble += "  " + ga->second.substr(ga->second.find_first_not_of(' ')) + "\n";
    } else {
      params += (params.empty() ? "" : ", ") + ("%" + name + " : Any");
    }
  }
  std::string text = "graph(" + params + "):\n" + preamble;
  for (const std::string& l : lines) {
    const size_t indent = l.find_first_not_of(' ');
    text += "  " + (indent == std::string::npos ? "" : l.substr(std::min(indent, base))) + "\n";
  }
  text += "  output()\n";
  ir::ParseOptions options;
  options.requireKnownOperators = false;
  options.namedTypes = g_.namedTypes();
  try {
    std::unique_ptr<Graph> scratch = ir::parseGraph(text, options);
    // The node parsed last at the top level, before the output.
    const Block* top = scratch->block();
    const Node* node = nullptr;
    for (const Node* n : *top)
      if (n->opcode() != Opcode::Output) node = n;
    if (!node || node->opcode() == Opcode::Placeholder) return nullptr;
    scratch_.push_back(std::move(scratch));
    return node;
  } catch (const std::exception&) {
    return nullptr;  // drawn from its text alone
  }
}

}  // namespace ptopt::draw
