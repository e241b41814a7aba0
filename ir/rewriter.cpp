#include "ir/rewriter.h"

#include "ir/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <unordered_map>

namespace ptopt::ir {

const char* editKindName(EditKind k) {
  switch (k) {
    case EditKind::Insert: return "insert";
    case EditKind::Erase: return "erase";
    case EditKind::Modify: return "modify";
    case EditKind::Move: return "move";
    case EditKind::SetConstant: return "set-constant";
  }
  return "?";
}

namespace {

// The detail of an edit of a graph input (a placeholder), which changes the
// graph's signature line.
const std::string kSignatureEdit = "signature: ";

std::string joinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// The text a node contributes to the text form (nested blocks included).
std::string nodeTreeText(const Node& n) { return joinLines(printNodeLines(n, textIndent(n), true)); }

}  // namespace

// ---------------------------------------------------------------- EditLog

ChangeSet EditLog::changesSince(size_t from) const {
  ChangeSet cs;
  // Removed text by the node it stood before, in text order.
  std::map<const Node*, std::vector<std::string>> removedAt;
  auto remove = [&](const Node* node, std::string text, const Node* anchor) {
    // What stood before `node` now stands before its anchor, ahead of what
    // was removed there earlier (those stood after `node`).
    std::vector<std::string> group;
    auto before = removedAt.find(node);
    if (before != removedAt.end()) {
      group = std::move(before->second);
      removedAt.erase(before);
    }
    group.push_back(std::move(text));
    std::vector<std::string>& at = removedAt[anchor];
    at.insert(at.begin(), std::make_move_iterator(group.begin()), std::make_move_iterator(group.end()));
  };
  // A node's text before the range: its first line from its first edit.
  auto textBefore = [&](const Node* node, std::string now) {
    auto it = cs.changed.find(node);
    if (it == cs.changed.end()) return now;
    const std::string before = it->second;
    cs.changed.erase(it);
    const size_t nowEnd = now.find('\n'), beforeEnd = before.find('\n');
    if (nowEnd == std::string::npos || beforeEnd == std::string::npos) return before;
    return before.substr(0, beforeEnd) + now.substr(nowEnd);
  };
  for (size_t i = from; i < edits_.size(); ++i) {
    const Edit& e = edits_[i];
    // Told by the detail, not by e.node: the node may be gone (never dereferenced).
    if (e.kind == EditKind::Modify && e.detail.rfind(kSignatureEdit, 0) == 0) {
      if (!cs.signatureChanged) cs.signatureBefore = e.text;
      cs.signatureChanged = true;
      continue;
    }
    switch (e.kind) {
      case EditKind::Insert:
        cs.added.insert(e.node);
        break;
      case EditKind::Move:
        // An erase at the old place and an insert at the new one.
        if (!cs.added.count(e.node)) {
          remove(e.node, textBefore(e.node, e.text), e.anchor);
          cs.added.insert(e.node);
        }
        break;
      case EditKind::Modify:
      case EditKind::SetConstant:
        if (!cs.added.count(e.node) && !cs.changed.count(e.node)) cs.changed.emplace(e.node, e.text);
        break;
      case EditKind::Erase:
        if (cs.added.erase(e.node)) {
          // Made and unmade in the range: what stood before it moves on.
          auto before = removedAt.find(e.node);
          if (before != removedAt.end()) {
            std::vector<std::string> group = std::move(before->second);
            removedAt.erase(before);
            std::vector<std::string>& at = removedAt[e.anchor];
            at.insert(at.begin(), std::make_move_iterator(group.begin()), std::make_move_iterator(group.end()));
          }
          break;
        }
        remove(e.node, textBefore(e.node, e.text), e.anchor);
        break;
    }
  }
  for (auto& [anchor, texts] : removedAt)
    for (std::string& t : texts) cs.removed.push_back({std::move(t), anchor});
  return cs;
}

std::string EditLog::summary(size_t from) const {
  std::map<std::string, std::map<std::string, size_t>> counts;
  std::vector<std::string> order;
  for (size_t i = from; i < edits_.size(); ++i) {
    if (!counts.count(edits_[i].pass)) order.push_back(edits_[i].pass);
    ++counts[edits_[i].pass][editKindName(edits_[i].kind)];
  }
  std::string out;
  for (const std::string& pass : order) {
    out += pass + ":";
    for (const auto& [kind, n] : counts[pass]) out += fmt::format(" {}={}", kind, n);
    out += "\n";
  }
  return out;
}

// ---------------------------------------------------------------- diffs

namespace {

struct DiffLine {
  char tag;  // ' ', '-', '+'
  std::string text;
};

void splitInto(const std::string& text, char tag, std::vector<DiffLine>& out) {
  std::istringstream is(text);
  std::string line;
  while (std::getline(is, line)) out.push_back({tag, line});
}

// Every line of the text form after, tagged, with the changes' lines before
// interleaved where they stood.
void walkBlock(const Block& b, int indent, const ChangeSet& cs,
               const std::unordered_map<const Node*, std::vector<const std::string*>>& removedBefore,
               std::vector<DiffLine>& out) {
  auto emitRemoved = [&](const Node* anchor) {
    auto it = removedBefore.find(anchor);
    if (it == removedBefore.end()) return;
    for (const std::string* text : it->second) splitInto(*text, '-', out);
  };
  for (const Node* n : b) {
    if (n->opcode() == Opcode::Placeholder) continue;
    emitRemoved(n);
    if (cs.added.count(n)) {
      for (const std::string& l : printNodeLines(*n, indent, true)) out.push_back({'+', l});
      continue;
    }
    auto changed = cs.changed.find(n);
    if (changed == cs.changed.end()) {
      out.push_back({' ', std::string(static_cast<size_t>(indent), ' ') + printNode(*n)});
    } else {
      // The node's own line; its block headers follow among the nested lines.
      std::vector<DiffLine> before;
      splitInto(changed->second, '-', before);
      out.push_back(before.empty() ? DiffLine{'-', ""} : before.front());
      out.push_back({'+', std::string(static_cast<size_t>(indent), ' ') + printNode(*n)});
    }
    const std::vector<std::string> own = printNodeLines(*n, indent, false);
    std::vector<DiffLine> beforeHeaders;
    if (changed != cs.changed.end()) splitInto(changed->second, '-', beforeHeaders);
    for (size_t i = 0; i < n->blocks().size(); ++i) {
      if (changed != cs.changed.end()) {
        // Headers of a changed node: before (when it printed one) and after.
        const std::string header = own[1 + i];
        const std::string prefix = header.substr(0, header.find('(') + 1);
        for (const DiffLine& l : beforeHeaders)
          if (l.text.rfind(prefix, 0) == 0) {
            out.push_back(l);
            break;
          }
        out.push_back({'+', header});
      } else {
        out.push_back({' ', own[1 + i]});
      }
      walkBlock(*n->block(i), indent + 4, cs, removedBefore, out);
    }
  }
}

}  // namespace

std::string unifiedDiffOfChanges(const Graph& after, const ChangeSet& changes, const std::string& beforeLabel,
                                 const std::string& afterLabel, size_t context) {
  if (changes.empty()) return "";
  std::unordered_map<const Node*, std::vector<const std::string*>> removedBefore;
  for (const ChangeSet::Removed& r : changes.removed) removedBefore[r.anchor].push_back(&r.text);

  std::vector<DiffLine> lines;
  if (changes.signatureChanged) {
    lines.push_back({'-', changes.signatureBefore});
    lines.push_back({'+', printSignature(after)});
  } else {
    lines.push_back({' ', printSignature(after)});
  }
  walkBlock(*after.block(), 2, changes, removedBefore, lines);
  // Removed nodes whose anchor is gone too (or was the end of a block) go last.
  auto tail = removedBefore.find(nullptr);
  if (tail != removedBefore.end())
    for (const std::string* text : tail->second) splitInto(*text, '-', lines);

  // Group into hunks with `context` unchanged lines around each change.
  std::string out = "--- " + beforeLabel + "\n+++ " + afterLabel + "\n";
  const size_t n = lines.size();
  size_t i = 0, oldLine = 1, newLine = 1;
  bool any = false;
  while (i < n) {
    if (lines[i].tag == ' ') {
      ++i, ++oldLine, ++newLine;
      continue;
    }
    // A hunk starts `context` lines before the change.
    size_t start = i >= context ? i - context : 0;
    size_t oldStart = oldLine - (i - start), newStart = newLine - (i - start);
    size_t end = i, quiet = 0;
    for (size_t j = i; j < n; ++j) {
      if (lines[j].tag == ' ') {
        if (++quiet > 2 * context) break;
      } else {
        quiet = 0;
        end = j;
      }
    }
    const size_t stop = std::min(n, end + 1 + context);
    size_t oldCount = 0, newCount = 0;
    std::string body;
    for (size_t j = start; j < stop; ++j) {
      body += lines[j].tag + lines[j].text + "\n";
      oldCount += lines[j].tag != '+';
      newCount += lines[j].tag != '-';
    }
    auto range = [](size_t s, size_t c) { return c == 1 ? std::to_string(s) : fmt::format("{},{}", c ? s : s - 1, c); };
    out += "@@ -" + range(oldStart, oldCount) + " +" + range(newStart, newCount) + " @@\n" + body;
    any = true;
    for (size_t j = i; j < stop; ++j) {
      oldLine += lines[j].tag != '+';
      newLine += lines[j].tag != '-';
    }
    i = stop;
  }
  return any ? out : "";
}

std::string applyDiffInReverse(const std::string& after, const std::string& diff) {
  std::vector<std::string> afterLines;
  {
    std::istringstream is(after);
    std::string l;
    while (std::getline(is, l)) afterLines.push_back(l);
  }
  std::istringstream is(diff);
  std::string line, out;
  size_t next = 0;  // next line of `after` not yet copied (0-based)
  while (std::getline(is, line)) {
    if (line.rfind("---", 0) == 0 || line.rfind("+++", 0) == 0) continue;
    if (line.rfind("@@", 0) == 0) {
      const size_t plus = line.find('+');
      size_t newStart = std::stoul(line.substr(plus + 1));
      const size_t comma = line.find(',', plus);
      const size_t space = line.find(' ', plus);
      if (comma != std::string::npos && comma < space && std::stoul(line.substr(comma + 1)) == 0) ++newStart;
      while (next + 1 < newStart && next < afterLines.size()) out += afterLines[next++] + "\n";
      continue;
    }
    if (line.empty()) continue;
    const char tag = line[0];
    const std::string text = line.substr(1);
    if (tag == ' ') {
      if (next >= afterLines.size() || afterLines[next] != text) return "(diff context does not match: " + text + ")";
      out += afterLines[next++] + "\n";
    } else if (tag == '+') {
      if (next >= afterLines.size() || afterLines[next] != text) return "(diff addition does not match: " + text + ")";
      ++next;
    } else if (tag == '-') {
      out += text + "\n";
    }
  }
  while (next < afterLines.size()) out += afterLines[next++] + "\n";
  return out;
}

// ---------------------------------------------------------------- Rewriter

Rewriter::Rewriter(Graph& g, EditLog* log, std::string pass) : g_(g), log_(log), pass_(std::move(pass)) {}

Node* Rewriter::nodeOf(Value* v) const {
  if (v->node()) return v->node();
  return v->paramOf() ? v->paramOf()->owningNode() : nullptr;
}

void Rewriter::logInsert(Node* n, const std::string& detail) {
  ++count_;
  touched_.insert(n);
  if (!log_) return;
  log_->add({EditKind::Insert, pass_, n, "", nullptr, detail});
  // Nested nodes come with it.
  for (const auto& b : n->blocks())
    for (Node* inner : *b) touched_.insert(inner);
}

void Rewriter::logModify(Node* n, const std::string& detail) {
  ++count_;
  if (!n || !log_) return;
  if (n->opcode() == Opcode::Placeholder) {
    log_->add({EditKind::Modify, pass_, n, log_->keepText() ? printSignature(g_) : "", nullptr, kSignatureEdit + detail});
    return;
  }
  if (!touched_.insert(n).second) return;  // its text before is logged already
  log_->add({EditKind::Modify, pass_, n, log_->keepText() ? joinLines(printNodeLines(*n, textIndent(*n), false)) : "",
             nullptr, detail});
}

void Rewriter::logErase(Node* n) {
  ++count_;
  if (!log_) return;
  log_->add({EditKind::Erase, pass_, n, log_->keepText() ? nodeTreeText(*n) : "", n->next(), ""});
}

void Rewriter::noteModify(Node* n, const std::string& detail) { logModify(n, detail); }

Node* Rewriter::insertCall(Node* before, const std::string& qualifiedTarget, std::vector<Arg> args,
                           std::vector<c10::TypePtr> outputTypes) {
  Node* n = g_.createCall(qualifiedTarget, std::move(args), std::move(outputTypes));
  return insert(n, before);
}

Node* Rewriter::appendCall(Block* block, const std::string& qualifiedTarget, std::vector<Arg> args,
                           std::vector<c10::TypePtr> outputTypes) {
  Node* n = g_.createCall(qualifiedTarget, std::move(args), std::move(outputTypes));
  return append(n, block);
}

Value* Rewriter::call(Node* before, const std::string& qualifiedTarget, std::vector<Arg> args,
                      c10::TypePtr outputType) {
  return insertCall(before, qualifiedTarget, std::move(args), {std::move(outputType)})->output();
}

Value* Rewriter::createLike(Node* like, const std::string& qualifiedTarget, std::vector<Arg> args,
                           const std::string& provenance, c10::TypePtr outputType) {
  Node* n = g_.createCall(qualifiedTarget, std::move(args), {std::move(outputType)});
  n->setScope(like->scope());
  if (like->numOutputs() == 1) n->output()->meta() = like->output()->meta();
  n->setProvenance(provenance.empty() ? pass_ : provenance);
  insert(n, like);
  return n->output();
}

Node* Rewriter::insert(Node* detached, Node* before) {
  detached->insertBefore(before);
  logInsert(detached, "");
  return detached;
}

Node* Rewriter::insertAfter(Node* detached, Node* after) {
  detached->insertAfter(after);
  logInsert(detached, "");
  return detached;
}

Node* Rewriter::append(Node* detached, Block* block) {
  // Before the block's output node when it has one: blocks end with it.
  if (Node* out = block->outputNode()) detached->insertBefore(out);
  else block->appendNode(detached);
  logInsert(detached, "");
  return detached;
}

Value* Rewriter::addConstant(const std::string& base, const at::Tensor& t, Node* before) {
  const std::string name = g_.constants().uniqueName(base);
  g_.constants().set(name, t);
  Node* n = g_.createGetAttr(name, c10::TensorType::get());
  n->insertBefore(before);
  logInsert(n, "constant " + name);
  return n->output();
}

Value* Rewriter::addConstant(const std::string& base, const c10::IValue& value, c10::TypePtr type, Node* before) {
  const std::string name = storeConstant(base, value);
  Node* n = g_.createGetAttr(name, std::move(type));
  n->insertBefore(before);
  logInsert(n, "constant " + name);
  return n->output();
}

std::string Rewriter::storeConstant(const std::string& base, const c10::IValue& value) {
  const std::string name = g_.constants().uniqueName(base);
  g_.constants().set(name, value);
  return name;
}

void Rewriter::dropConstant(const std::string& name) { g_.constants().erase(name); }

Value* Rewriter::getAttr(const std::string& name, c10::TypePtr type, Node* before) {
  Node* n = g_.createGetAttr(name, std::move(type));
  n->insertBefore(before);
  logInsert(n, "get_attr " + name);
  return n->output();
}

void Rewriter::setArg(Node* n, size_t i, Arg a) {
  logModify(n, "argument " + std::to_string(i));
  n->setArg(i, std::move(a));
}

void Rewriter::addArg(Node* n, Arg a) {
  logModify(n, "add argument");
  n->addArg(std::move(a));
}

void Rewriter::removeArg(Node* n, size_t i) {
  logModify(n, "remove argument " + std::to_string(i));
  n->removeArg(i);
}

void Rewriter::setArgs(Node* n, std::vector<Arg> args) {
  logModify(n, "arguments");
  n->removeAllArgs();
  for (Arg& a : args) n->addArg(std::move(a));
}

void Rewriter::setAttr(Node* n, const std::string& name, AttrValue v) {
  logModify(n, "attribute " + name);
  n->setAttr(name, std::move(v));
}

void Rewriter::replaceAllUsesWith(Value* from, Value* to) {
  if (from == to) return;
  for (const Use& u : from->uses()) logModify(u.user, "uses of %" + from->name() + " -> %" + to->name());
  from->replaceAllUsesWith(to);
}

void Rewriter::replaceUsesIf(Value* from, Value* to, const std::function<bool(const Use&)>& pred) {
  if (from == to) return;
  for (const Use& u : from->uses())
    if (pred(u)) logModify(u.user, "uses of %" + from->name() + " -> %" + to->name());
  from->replaceUsesWithIf(to, pred);
}

void Rewriter::replace(Node* old, Value* with) {
  replaceAllUsesWith(old->output(), with);
  erase(old);
}

void Rewriter::erase(Node* n) {
  logErase(n);
  // The graph may reuse the addresses of n and its nested nodes for new
  // nodes, whose first edits must be logged with their own text.
  std::function<void(Node*)> forget = [&](Node* m) {
    touched_.erase(m);
    for (const auto& b : m->blocks())
      for (Node* inner : *b) forget(inner);
  };
  forget(n);
  n->destroy();
}

void Rewriter::eraseConstantIfUnused(Value* v) {
  // Only the node: other methods of the model share the constant table and
  // may still read the constant (export writes only constants some graph reads).
  if (v && !v->hasUses() && v->node() && v->node()->opcode() == Opcode::GetAttr) erase(v->node());
}

void Rewriter::setConstant(Node* getAttr, const at::Tensor& t) {
  ++count_;
  if (log_)
    log_->add({EditKind::SetConstant, pass_, getAttr,
               log_->keepText() ? joinLines(printNodeLines(*getAttr, textIndent(*getAttr), false)) : "", nullptr,
               "constant " + getAttr->target()});
  g_.constants().set(getAttr->target(), t);
}

void Rewriter::moveBefore(Node* n, Node* before) {
  if (n->next() == before) return;
  ++count_;
  if (log_) log_->add({EditKind::Move, pass_, n, log_->keepText() ? nodeTreeText(*n) : "", n->next(), ""});
  n->moveBefore(before);
}

void Rewriter::moveAfter(Node* n, Node* after) {
  if (after->next() == n) return;
  ++count_;
  if (log_) log_->add({EditKind::Move, pass_, n, log_->keepText() ? nodeTreeText(*n) : "", n->next(), ""});
  n->moveAfter(after);
}

void Rewriter::setMeta(Value* v, const TensorMeta& m) {
  if (v->meta() == m) return;
  logModify(nodeOf(v), "metadata of %" + v->name());
  v->meta() = m;
}

void Rewriter::setType(Value* v, c10::TypePtr t) {
  if (v->type() == t || (v->type() && t && *v->type() == *t)) return;
  logModify(nodeOf(v), "type of %" + v->name());
  v->setType(std::move(t));
}

void Rewriter::setName(Value* v, const std::string& name) {
  if (v->name() == name) return;
  logModify(nodeOf(v), "name of %" + v->name());
  for (const Use& u : v->uses()) logModify(u.user, "name of %" + v->name());
  v->setName(name);
}

Value* Rewriter::addOutput(Node* n, c10::TypePtr type, const std::string& name) {
  logModify(n, "add output");
  return n->addOutput(std::move(type), name);
}

void Rewriter::eraseOutput(Node* n, size_t i) {
  logModify(n, "erase output " + std::to_string(i));
  n->eraseOutput(i);
}

Value* Rewriter::addParam(Block* b, c10::TypePtr type, const std::string& name) {
  logModify(b->owningNode(), "add block parameter");
  return b->addParam(std::move(type), name);
}

void Rewriter::eraseParam(Block* b, size_t i) {
  logModify(b->owningNode(), "erase block parameter " + std::to_string(i));
  b->eraseParam(i);
}

Block* Rewriter::addBlock(Node* n) {
  logModify(n, "add block");
  return n->addBlock();
}

}  // namespace ptopt::ir
