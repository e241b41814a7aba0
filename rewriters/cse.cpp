#include "rewriters/cse.h"

#include "ir/dead_code.h"
#include "ir/mutation.h"

#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>

namespace ptopt::rewriters {

namespace {

// ------------------------------------------------------------------ hashing

void combine(size_t& seed, size_t h) { seed ^= h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

size_t doubleBits(double d) {
  uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof bits);
  return std::hash<uint64_t>{}(bits);
}

size_t hashLiteral(const ir::Literal& l) {
  size_t seed = l.value().index();
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, ir::NoneLiteral>) {
        } else if constexpr (std::is_same_v<T, double>) {
          combine(seed, doubleBits(v));
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          for (double d : v) combine(seed, doubleBits(d));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<std::string>>) {
          for (const auto& e : v) combine(seed, std::hash<std::decay_t<decltype(e)>>{}(e));
        } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          for (bool e : v) combine(seed, e ? 1 : 2);
        } else if constexpr (std::is_same_v<T, c10::Device>) {
          combine(seed, static_cast<size_t>(v.type()));
          combine(seed, static_cast<size_t>(v.index() + 1));
        } else if constexpr (std::is_enum_v<T>) {
          combine(seed, static_cast<size_t>(v));
        } else {
          combine(seed, std::hash<T>{}(v));
        }
      },
      l.value());
  return seed;
}

// Literal equality, bit for bit for floats (0.0 and -0.0 differ; NaN equals a
// NaN with the same bits): merging must never change a result.
bool identicalLiterals(const ir::Literal& a, const ir::Literal& b) {
  if (a.value().index() != b.value().index()) return false;
  if (a.is<double>()) return std::memcmp(&a.as<double>(), &b.as<double>(), sizeof(double)) == 0;
  if (a.is<std::vector<double>>()) {
    const auto &x = a.as<std::vector<double>>(), &y = b.as<std::vector<double>>();
    return x.size() == y.size() &&
           (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0);
  }
  return a == b;
}

bool identicalAttrs(const ir::Node* a, const ir::Node* b) {
  const auto &x = a->attrs(), &y = b->attrs();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first || x[i].second.index() != y[i].second.index()) return false;
    if (const auto* lx = std::get_if<ir::Literal>(&x[i].second)) {
      if (!identicalLiterals(*lx, std::get<ir::Literal>(y[i].second))) return false;
    } else {
      const auto &tx = std::get<ir::TypesAttr>(x[i].second), &ty = std::get<ir::TypesAttr>(y[i].second);
      if (tx.isList != ty.isList || tx.types.size() != ty.types.size()) return false;
      for (size_t j = 0; j < tx.types.size(); ++j)
        if (*tx.types[j] != *ty.types[j]) return false;
    }
  }
  return true;
}

struct NodeHash {
  size_t operator()(const ir::Node* n) const {
    size_t seed = static_cast<size_t>(n->opcode());
    combine(seed, std::hash<std::string>{}(n->target()));
    combine(seed, std::hash<std::string>{}(n->overload()));
    for (const ir::Arg& a : n->args())
      combine(seed, a.isValue() ? std::hash<const void*>{}(a.value()) : hashLiteral(a.literal()));
    return seed;
  }
};

struct NodeEqual {
  bool operator()(const ir::Node* a, const ir::Node* b) const {
    if (a->opcode() != b->opcode() || a->target() != b->target()) return false;
    if (a->opcode() == ir::Opcode::GetAttr) return true;
    if (a->overload() != b->overload() || a->numArgs() != b->numArgs() ||
        a->numOutputs() != b->numOutputs())
      return false;
    for (size_t i = 0; i < a->numArgs(); ++i) {
      const ir::Arg &x = a->arg(i), &y = b->arg(i);
      if (x.isValue() != y.isValue()) return false;
      if (x.isValue() ? x.value() != y.value() : !identicalLiterals(x.literal(), y.literal())) return false;
    }
    for (size_t i = 0; i < a->numOutputs(); ++i)
      if (*a->output(i)->type() != *b->output(i)->type()) return false;
    return identicalAttrs(a, b);
  }
};

}  // namespace

// ------------------------------------------------------------------ the pass

PassResult CsePass::run(ir::Graph& graph, PassContext& ctx) {
  PassResult result;
  ir::Rewriter rw(graph, ctx.edits, name());
  const ir::MutationAnalysis mutation(graph);

  auto isPureCall = [](const ir::Node* n) {
    return n->isCall() && n->blocks().empty() && n->numOutputs() > 0 && !ir::hasSideEffects(n);
  };
  auto touchesMutation = [&](const ir::Node* n) {
    for (const auto& out : n->outputs())
      if (mutation.mayBeMutated(out.get())) return true;
    for (const ir::Arg& a : n->args())
      if (mutation.mayBeMutated(a.value())) return true;
    return false;
  };

  // `available` holds the candidates that dominate the current node. Pure
  // nodes left alone because of mutation go to `blocked`, only so that a
  // second equal one can say why it was kept.
  std::unordered_set<ir::Node*, NodeHash, NodeEqual> available, blocked;
  int64_t eliminated = 0;

  std::function<void(ir::Block*)> processBlock = [&](ir::Block* block) {
    std::vector<ir::Node*> addedAvailable, addedBlocked;
    for (ir::Node* n = block->first(); n;) {
      ir::Node* next = n->next();
      for (const auto& nested : n->blocks()) processBlock(nested.get());

      const bool getAttr = n->opcode() == ir::Opcode::GetAttr;
      // Opaque operators (torchvision::nms, custom ops) are never merged:
      // ptopt cannot know that two calls give the same result.
      const bool opaque = ir::isOpaque(n) && n->blocks().empty() && n->numOutputs() > 0;
      if (!getAttr && !opaque && !isPureCall(n)) { n = next; continue; }

      std::string keepReason;
      if (opaque)
        keepReason = "it calls opaque operator " + n->qualifiedTarget() +
                     ", which ptopt does not know to be free of side effects";
      else if (touchesMutation(n))
        keepReason = "an input or result may be mutated in place (or compared by identity)";
      if (!keepReason.empty()) {
        auto it = blocked.find(n);
        if (it != blocked.end())
          ctx.decline(name(), n, "equal to " + describeNode(*it) + " but " + keepReason);
        else if (blocked.insert(n).second)
          addedBlocked.push_back(n);
        n = next;
        continue;
      }

      auto it = available.find(n);
      if (it == available.end()) {
        available.insert(n);
        addedAvailable.push_back(n);
        n = next;
        continue;
      }
      ir::Node* rep = *it;
      bool bothEscape = false;
      for (size_t i = 0; i < n->numOutputs(); ++i)
        bothEscape = bothEscape || (mutation.mayEscape(rep->output(i)) && mutation.mayEscape(n->output(i)));
      if (bothEscape) {
        ctx.decline(name(), n, "equal to " + describeNode(rep) +
                                   " but both results reach the graph outputs (the caller would get one object twice)");
        n = next;
        continue;
      }
      for (size_t i = 0; i < n->numOutputs(); ++i) {
        ir::Value* keep = rep->output(i);
        if (keep->meta().empty()) rw.setMeta(keep, n->output(i)->meta());
        rw.replaceAllUsesWith(n->output(i), keep);
      }
      rw.erase(n);
      ++eliminated;
      n = next;
    }
    // Leaving the scope: its nodes no longer dominate what follows.
    for (ir::Node* n : addedAvailable) available.erase(n);
    for (ir::Node* n : addedBlocked) blocked.erase(n);
  };
  processBlock(graph.block());

  result.changed = rw.changed();
  if (eliminated) result.count("eliminated", eliminated);
  return result;
}

}  // namespace ptopt::rewriters
