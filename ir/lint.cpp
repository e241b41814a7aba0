#include "ir/lint.h"

#include "ir/graph_traits.h"
#include "ir/text.h"

#include <boost/graph/topological_sort.hpp>
#include <boost/property_map/property_map.hpp>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::ir {

std::vector<Node*> topologicalOrder(const Block& b) {
  std::unordered_map<Node*, boost::default_color_type> colors;
  std::vector<Node*> reversed;
  boost::topological_sort(b, std::back_inserter(reversed),
                          boost::color_map(boost::make_assoc_property_map(colors)));
  return {reversed.rbegin(), reversed.rend()};
}

namespace {

std::string describe(const Node* n) {
  std::string s = n->opcode() == Opcode::CallFunction ? n->qualifiedTarget() : opcodeName(n->opcode());
  if (n->opcode() == Opcode::GetAttr) s += "[\"" + n->target() + "\"]";
  if (n->numOutputs()) s = "%" + n->output()->name() + " = " + s;
  return "'" + s + "'";
}

class Linter {
 public:
  explicit Linter(const Graph& g) : g_(g) {
    g.walk([&](Node* n) { live_.insert(n); });
  }

  std::vector<LintIssue> run() {
    lintBlock(*g_.block(), /*isTop=*/true);
    return std::move(issues_);
  }

 private:
  void report(std::string msg) { issues_.push_back({std::move(msg)}); }

  void define(const Value* v, std::vector<const Value*>& definedHere) {
    auto [it, inserted] = names_.emplace(v->name(), v);
    if (!inserted && it->second != v) report("value %" + v->name() + " is defined twice");
    visible_.insert(v);
    definedHere.push_back(v);
    for (const Use& u : v->uses()) {
      if (!live_.count(u.user)) {
        report("dangling use: %" + v->name() + " is used by a node that is no longer in the graph");
      } else if (u.argIndex >= u.user->numArgs() || u.user->arg(u.argIndex).value() != v) {
        report("broken use list: %" + v->name() + " lists a use by " + describe(u.user) +
               " (argument " + std::to_string(u.argIndex) + ") that does not refer to it");
      }
    }
  }

  void checkArgs(const Node* n) {
    for (size_t i = 0; i < n->numArgs(); ++i) {
      const Value* v = n->arg(i).value();
      if (!v) continue;
      const auto& uses = v->uses();
      if (std::find(uses.begin(), uses.end(), Use{const_cast<Node*>(n), i}) == uses.end())
        report("broken use list: " + describe(n) + " uses %" + v->name() +
               " (argument " + std::to_string(i) + ") but the value's use list does not say so");
      if (visible_.count(v)) continue;
      if (closed_.count(v)) {
        report(describe(n) + " uses %" + v->name() + " outside the block that defines it");
      } else if (v->node() && !live_.count(v->node())) {
        report("dangling value: " + describe(n) + " uses %" + v->name() +
               " whose defining node is not in the graph");
      } else {
        report(describe(n) + " uses %" + v->name() + " before its definition");
      }
    }
  }

  void lintBlock(const Block& b, bool isTop) {
    std::vector<const Value*> definedHere;
    for (const auto& p : b.params()) define(p.get(), definedHere);
    bool pastPlaceholders = false;
    for (const Node* n : b) {
      if (n->owningBlock() != &b) report(describe(n) + " has a wrong owning block");
      if (n->opcode() == Opcode::Placeholder) {
        if (!isTop || pastPlaceholders)
          report(describe(n) + ": placeholders must open the top-level block");
      } else {
        pastPlaceholders = true;
      }
      if (n->opcode() == Opcode::Output && n != b.last())
        report("an output node is not the last node of its block");
      if (n->opcode() == Opcode::GetAttr && !g_.constants().contains(n->target()))
        report(describe(n) + " names a constant that does not exist");
      checkArgs(n);
      for (const auto& nested : n->blocks()) lintBlock(*nested, false);
      for (const auto& out : n->outputs()) {
        if (out->node() != n) report("%" + out->name() + " does not point at its defining node");
        define(out.get(), definedHere);
      }
    }
    if (!b.outputNode()) report("a block does not end with an output node");
    try {
      topologicalOrder(b);
    } catch (const boost::not_a_dag&) {
      report("the uses in a block form a cycle");
    }
    for (const Value* v : definedHere) {
      visible_.erase(v);
      closed_.insert(v);
    }
  }

  const Graph& g_;
  std::vector<LintIssue> issues_;
  std::unordered_set<const Node*> live_;
  std::unordered_set<const Value*> visible_;
  std::unordered_set<const Value*> closed_;
  std::unordered_map<std::string, const Value*> names_;
};

}  // namespace

std::vector<LintIssue> lint(const Graph& g) { return Linter(g).run(); }

void lintOrThrow(const Graph& g, const std::string& context) {
  auto issues = lint(g);
  if (issues.empty()) return;
  std::string msg = context.empty() ? "IR lint failed:" : context + ": IR lint failed:";
  for (const auto& i : issues) msg += "\n  - " + i.message;
  throw LintError(msg);
}

}  // namespace ptopt::ir
