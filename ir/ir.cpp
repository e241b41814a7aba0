#include "ir/ir.h"

#include "ir/qdq_ops.h"

#include "ir/text.h"

#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <stdexcept>

namespace ptopt::ir {

const char* opcodeName(Opcode op) {
  switch (op) {
    case Opcode::Placeholder: return "placeholder";
    case Opcode::GetAttr: return "get_attr";
    case Opcode::CallFunction: return "call_function";
    case Opcode::Output: return "output";
  }
  return "?";
}

// ---------------------------------------------------------------- Value

std::ostream& operator<<(std::ostream& os, const Use& u) {
  return os << "Use(" << (u.user ? u.user->qualifiedTarget() : "null") << ", " << u.argIndex << ")";
}

Block* Value::owningBlock() const { return node_ ? node_->owningBlock() : paramOf_; }

void Value::removeUse(Node* user, size_t i) {
  auto it = std::find(uses_.begin(), uses_.end(), Use{user, i});
  if (it != uses_.end()) uses_.erase(it);
}

void Value::replaceAllUsesWith(Value* other) {
  if (other == this) return;
  for (const Use& u : uses_) {
    u.user->args_[u.argIndex] = Arg(other);
    other->addUse(u.user, u.argIndex);
  }
  uses_.clear();
}

void Value::replaceUsesWithIf(Value* other, const std::function<bool(const Use&)>& pred) {
  if (other == this) return;
  std::vector<Use> kept;
  for (const Use& u : uses_) {
    if (pred(u)) {
      u.user->args_[u.argIndex] = Arg(other);
      other->addUse(u.user, u.argIndex);
    } else {
      kept.push_back(u);
    }
  }
  uses_ = std::move(kept);
}

void Value::setName(const std::string& name) {
  graph_->unregisterName(this);
  graph_->registerName(this, name);
}

// ---------------------------------------------------------------- Arg

std::string Arg::str() const { return isValue() ? "%" + value()->name() : literal().str(); }

// ---------------------------------------------------------------- Node

std::string Node::qualifiedTarget() const {
  return overload_.empty() ? target_ : target_ + "." + overload_;
}

void Node::setArg(size_t i, Arg a) {
  if (Value* old = args_.at(i).value()) old->removeUse(this, i);
  args_[i] = std::move(a);
  if (Value* v = args_[i].value()) v->addUse(this, i);
}

void Node::addArg(Arg a) {
  args_.push_back(std::move(a));
  if (Value* v = args_.back().value()) v->addUse(this, args_.size() - 1);
}

void Node::removeArg(size_t i) {
  if (Value* old = args_.at(i).value()) old->removeUse(this, i);
  for (size_t j = i + 1; j < args_.size(); ++j) {
    if (Value* v = args_[j].value()) {
      for (Use& u : v->uses_)
        if (u.user == this && u.argIndex == j) { u.argIndex = j - 1; break; }
    }
  }
  args_.erase(args_.begin() + static_cast<std::ptrdiff_t>(i));
}

void Node::removeAllArgs() {
  for (size_t i = 0; i < args_.size(); ++i)
    if (Value* v = args_[i].value()) v->removeUse(this, i);
  args_.clear();
}

std::optional<size_t> Node::argIndex(const std::string& name) const {
  if (!schema_) return std::nullopt;
  auto idx = schema_->argumentIndexWithName(name);
  if (!idx || static_cast<size_t>(*idx) >= args_.size()) return std::nullopt;
  return static_cast<size_t>(*idx);
}

Value* Node::addOutput(c10::TypePtr type, const std::string& name) {
  outputs_.emplace_back(new Value(graph_, this, nullptr, outputs_.size(), std::move(type)));
  Value* v = outputs_.back().get();
  graph_->registerName(v, name);
  return v;
}

void Node::eraseOutput(size_t i) {
  Value* v = output(i);
  if (v->hasUses())
    throw std::logic_error("eraseOutput: %" + v->name() + " still has uses");
  graph_->unregisterName(v);
  outputs_.erase(outputs_.begin() + static_cast<std::ptrdiff_t>(i));
  for (size_t j = i; j < outputs_.size(); ++j) outputs_[j]->index_ = j;
}

Block* Node::addBlock() {
  blocks_.emplace_back(new Block(graph_, this));
  Block* b = blocks_.back().get();
  b->appendNode(graph_->createNode(Opcode::Output));
  return b;
}

void Node::setAttr(const std::string& name, AttrValue v) {
  for (auto& [k, val] : attrs_)
    if (k == name) { val = std::move(v); return; }
  attrs_.emplace_back(name, std::move(v));
}

const AttrValue* Node::attr(const std::string& name) const {
  for (const auto& [k, val] : attrs_)
    if (k == name) return &val;
  return nullptr;
}

void Node::insertBefore(Node* n) {
  if (owner_) throw std::logic_error("insertBefore: node is already in a block");
  owner_ = n->owner_;
  prev_ = n->prev_;
  next_ = n;
  if (prev_) prev_->next_ = this; else owner_->first_ = this;
  n->prev_ = this;
  ++owner_->size_;
}

void Node::insertAfter(Node* n) {
  if (owner_) throw std::logic_error("insertAfter: node is already in a block");
  owner_ = n->owner_;
  prev_ = n;
  next_ = n->next_;
  if (next_) next_->prev_ = this; else owner_->last_ = this;
  n->next_ = this;
  ++owner_->size_;
}

void Node::unlink() {
  if (!owner_) return;
  if (prev_) prev_->next_ = next_; else owner_->first_ = next_;
  if (next_) next_->prev_ = prev_; else owner_->last_ = prev_;
  --owner_->size_;
  owner_ = nullptr;
  prev_ = next_ = nullptr;
}

void Node::moveBefore(Node* n) { unlink(); insertBefore(n); }
void Node::moveAfter(Node* n) { unlink(); insertAfter(n); }
void Node::detachUnchecked() { unlink(); }

bool Node::isBefore(const Node* n) const {
  if (owner_ != n->owner_) return false;
  for (const Node* cur = next_; cur; cur = cur->next_)
    if (cur == n) return true;
  return false;
}

Node* Node::ancestorIn(const Block* b) const {
  const Node* cur = this;
  while (cur) {
    if (cur->owner_ == b) return const_cast<Node*>(cur);
    cur = cur->owner_ ? cur->owner_->owningNode_ : nullptr;
  }
  return nullptr;
}

void Node::destroy() {
  for (const auto& out : outputs_)
    if (out->hasUses())
      throw std::logic_error("destroy: output %" + out->name() + " of " + qualifiedTarget() +
                             " still has uses");
  // Erase nested nodes users-first (reverse program order).
  for (auto& b : blocks_) {
    for (Node* n = b->last(); n;) {
      Node* prev = n->prev();
      n->destroy();
      n = prev;
    }
  }
  removeAllArgs();
  unlink();
  graph_->releaseNode(this);
}

// ---------------------------------------------------------------- Block

std::vector<Node*> Block::nodes() const {
  std::vector<Node*> out;
  out.reserve(size_);
  for (Node* n = first_; n; n = n->next()) out.push_back(n);
  return out;
}

Node* Block::outputNode() const {
  return last_ && last_->opcode() == Opcode::Output ? last_ : nullptr;
}

std::vector<Value*> Block::outputValues() const {
  std::vector<Value*> out;
  if (Node* o = outputNode())
    for (const Arg& a : o->args()) out.push_back(a.value());
  return out;
}

Value* Block::addParam(c10::TypePtr type, const std::string& name) {
  params_.emplace_back(new Value(graph_, nullptr, this, params_.size(), std::move(type)));
  Value* v = params_.back().get();
  graph_->registerName(v, name);
  return v;
}

void Block::eraseParam(size_t i) {
  Value* v = param(i);
  if (v->hasUses()) throw std::logic_error("eraseParam: %" + v->name() + " still has uses");
  graph_->unregisterName(v);
  params_.erase(params_.begin() + static_cast<std::ptrdiff_t>(i));
  for (size_t j = i; j < params_.size(); ++j) params_[j]->index_ = j;
}

void Block::appendNode(Node* n) {
  if (last_) {
    n->insertAfter(last_);
  } else {
    if (n->owner_) throw std::logic_error("appendNode: node is already in a block");
    n->owner_ = this;
    first_ = last_ = n;
    size_ = 1;
  }
}

void Block::prependNode(Node* n) {
  if (first_) n->insertBefore(first_); else appendNode(n);
}

// ---------------------------------------------------------------- ConstantTable

const c10::IValue& ConstantTable::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::out_of_range("no constant named '" + name + "'");
  return it->second;
}

std::string ConstantTable::uniqueName(const std::string& base) const {
  if (!contains(base)) return base;
  // Resumes where the last search for this base stopped: thousands of
  // constants derived from one base (`const.folded`) would otherwise probe
  // every taken suffix each time.
  size_t& next = nextSuffix_[base];
  for (next = std::max<size_t>(next, 1);; ++next) {
    std::string candidate = base + "." + std::to_string(next);
    if (!contains(candidate)) return candidate;
  }
}

// ---------------------------------------------------------------- Graph

Graph::Graph(std::shared_ptr<ConstantTable> constants)
    : constants_(constants ? std::move(constants) : std::make_shared<ConstantTable>()),
      block_(new Block(this, nullptr)) {
  block_->appendNode(createNode(Opcode::Output));
}

Graph::~Graph() = default;

std::vector<Value*> Graph::inputs() const {
  std::vector<Value*> out;
  for (Node* n : *block_) {
    if (n->opcode() != Opcode::Placeholder) break;
    out.push_back(n->output());
  }
  return out;
}

Node* Graph::createNode(Opcode op, const std::string& target, const std::string& overload) {
  auto* n = new Node(this, op, target, overload);
  n->poolIndex_ = pool_.size();
  pool_.emplace_back(n);
  return n;
}

Node* Graph::createCall(const std::string& qualifiedTarget, std::vector<Arg> args,
                        std::vector<c10::TypePtr> outputTypes) {
  auto [target, overload] = splitQualifiedTarget(qualifiedTarget);
  Node* n = createNode(Opcode::CallFunction, target, overload);
  n->setSchema(findSchema(target, overload));
  for (auto& a : args) n->addArg(std::move(a));
  for (auto& t : outputTypes) n->addOutput(std::move(t));
  return n;
}

Value* Graph::addInput(c10::TypePtr type, const std::string& name) {
  Node* n = createNode(Opcode::Placeholder);
  Value* v = n->addOutput(std::move(type), name);
  Node* after = nullptr;
  for (Node* cur : *block_) {
    if (cur->opcode() != Opcode::Placeholder) break;
    after = cur;
  }
  if (after) n->insertAfter(after); else block_->prependNode(n);
  return v;
}

Node* Graph::createGetAttr(const std::string& name, c10::TypePtr type) {
  Node* n = createNode(Opcode::GetAttr, name);
  n->addOutput(std::move(type), name);
  return n;
}

void Graph::registerName(Value* v, const std::string& requested) {
  std::string base;
  base.reserve(requested.size());
  for (char c : requested)
    base += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') ? c : '_';
  if (base.empty()) {
    do base = std::to_string(nextId_++); while (names_.count(base));
  } else if (names_.count(base)) {
    // Strip a numeric suffix (`x.3` -> `x`) and count up from there.
    std::string stem = base;
    auto dot = stem.rfind('.');
    if (dot != std::string::npos && dot + 1 < stem.size() &&
        std::all_of(stem.begin() + static_cast<std::ptrdiff_t>(dot) + 1, stem.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      stem.resize(dot);
    size_t& counter = nameCounters_[stem];
    do base = stem + "." + std::to_string(++counter); while (names_.count(base));
  }
  v->name_ = base;
  names_[base] = v;
}

void Graph::unregisterName(Value* v) {
  auto it = names_.find(v->name_);
  if (it != names_.end() && it->second == v) names_.erase(it);
}

std::string Graph::uniqueValueName(const std::string& base) {
  if (!base.empty() && !names_.count(base)) return base;
  for (size_t i = 1;; ++i) {
    std::string c = (base.empty() ? std::string("v") : base) + "." + std::to_string(i);
    if (!names_.count(c)) return c;
  }
}

Value* Graph::findValue(const std::string& name) const {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : it->second;
}

void Graph::releaseNode(Node* n) {
  for (const auto& out : n->outputs_) unregisterName(out.get());
  for (const auto& b : n->blocks_)
    for (const auto& p : b->params_) unregisterName(p.get());
  const size_t idx = n->poolIndex_;
  if (idx != pool_.size() - 1) {
    std::swap(pool_[idx], pool_.back());
    pool_[idx]->poolIndex_ = idx;
  }
  pool_.pop_back();  // frees n
}

namespace {
void walkBlock(const Block* b, const std::function<void(Node*)>& f) {
  for (Node* n : *b) {
    f(n);
    for (const auto& nested : n->blocks()) walkBlock(nested.get(), f);
  }
}
}  // namespace

void Graph::walk(const std::function<void(Node*)>& f) const { walkBlock(block_.get(), f); }

size_t Graph::numNodes() const {
  size_t count = 0;
  walk([&](Node*) { ++count; });
  return count;
}

std::string Graph::str() const { return printGraph(*this); }

// ---------------------------------------------------------------- helpers

std::pair<std::string, std::string> splitQualifiedTarget(const std::string& s) {
  auto ns = s.find("::");
  auto dot = s.find('.', ns == std::string::npos ? 0 : ns + 2);
  if (dot == std::string::npos) return {s, ""};
  return {s.substr(0, dot), s.substr(dot + 1)};
}

const c10::FunctionSchema* findSchema(const std::string& target, const std::string& overload) {
  if (target.find("::") == std::string::npos) return nullptr;
  const auto symbol = c10::Symbol::fromQualString(target);
  for (const auto& op : torch::jit::getAllOperatorsFor(symbol))
    if (op->schema().overload_name() == overload) return &op->schema();
  return qdqSchema(target, overload);  // PT2E's Q/DQ ops, defined in Python only
}

Node* Builder::insert(Node* n) {
  if (before_) n->insertBefore(before_);
  else if (Node* out = block_->outputNode()) n->insertBefore(out);
  else block_->appendNode(n);
  return n;
}

Node* Builder::callNode(const std::string& qualifiedTarget, std::vector<Arg> args,
                        std::vector<c10::TypePtr> outputTypes) {
  return insert(graph().createCall(qualifiedTarget, std::move(args), std::move(outputTypes)));
}

Value* Builder::call(const std::string& qualifiedTarget, std::vector<Arg> args,
                     c10::TypePtr outputType) {
  return callNode(qualifiedTarget, std::move(args), {std::move(outputType)})->output();
}

}  // namespace ptopt::ir
