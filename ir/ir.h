// The ptopt graph IR: FX-style nodes over TorchScript operators.
//
// A Graph owns one top-level Block. A Block is an ordered list of Nodes that
// ends with exactly one `output` node; nested blocks (the bodies of prim::If
// and prim::Loop) also have parameters, like MLIR region arguments. Nodes carry
// an FX opcode:
//   placeholder    a graph input (only at the start of the top-level block)
//   get_attr       a named constant (a parameter or buffer after freezing)
//   call_function  an operator (`aten::conv2d`, `prim::If`), with its overload
//                  and, when the operator has one, its resolved schema
//   output         the values a block returns
// Arguments are FX-style: each is a Value or an inline Literal. Values carry a
// TorchScript type and optional metadata (dtype, shape, memory format, device)
// filled by shape propagation. Every Value keeps its use list; all edits go
// through Node/Value methods that keep use lists right, plus a few `Unchecked`
// mutators that exist only so tests can build broken IR for the linter.
#pragma once

#include "ir/literal.h"

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace ptopt::ir {

class Block;
class Graph;
class Node;
class Value;

enum class Opcode { Placeholder, GetAttr, CallFunction, Output };
const char* opcodeName(Opcode op);

// What shape propagation knows about a tensor value; every field optional.
struct TensorMeta {
  std::optional<c10::ScalarType> dtype;
  std::optional<std::vector<int64_t>> shape;
  std::optional<c10::MemoryFormat> memoryFormat;
  std::optional<c10::Device> device;
  bool empty() const { return !dtype && !shape && !memoryFormat && !device; }
  bool operator==(const TensorMeta& o) const {
    return dtype == o.dtype && shape == o.shape && memoryFormat == o.memoryFormat &&
           device == o.device;
  }
};

struct Use {
  Node* user;
  size_t argIndex;
  bool operator==(const Use& o) const { return user == o.user && argIndex == o.argIndex; }
};

std::ostream& operator<<(std::ostream& os, const Use& u);

class Value {
 public:
  const std::string& name() const { return name_; }
  const c10::TypePtr& type() const { return type_; }
  void setType(c10::TypePtr t) { type_ = std::move(t); }
  TensorMeta& meta() { return meta_; }
  const TensorMeta& meta() const { return meta_; }
  bool isTensor() const { return type_ && type_->kind() == c10::TypeKind::TensorType; }

  // Defining node, or nullptr for a block parameter.
  Node* node() const { return node_; }
  // The block this value is a parameter of, or nullptr.
  Block* paramOf() const { return paramOf_; }
  // The block whose scope defines this value.
  Block* owningBlock() const;
  size_t index() const { return index_; }

  const std::vector<Use>& uses() const { return uses_; }
  bool hasUses() const { return !uses_.empty(); }
  void replaceAllUsesWith(Value* other);
  // Replaces the uses for which `pred(use)` holds.
  void replaceUsesWithIf(Value* other, const std::function<bool(const Use&)>& pred);

  Graph& graph() const { return *graph_; }
  // Renames, keeping names unique in the graph (a suffix is added on clash).
  void setName(const std::string& name);
  // Test hook: renames without uniquing (lets lint tests make duplicates).
  void setNameUnchecked(const std::string& name) { name_ = name; }

 private:
  friend class Node;
  friend class Block;
  friend class Graph;
  Value(Graph* g, Node* node, Block* paramOf, size_t index, c10::TypePtr type)
      : graph_(g), node_(node), paramOf_(paramOf), index_(index), type_(std::move(type)) {}
  void addUse(Node* user, size_t i) { uses_.push_back({user, i}); }
  void removeUse(Node* user, size_t i);

  Graph* graph_;
  Node* node_;
  Block* paramOf_;
  size_t index_;
  std::string name_;
  c10::TypePtr type_;
  TensorMeta meta_;
  std::vector<Use> uses_;
};

class Arg {
 public:
  Arg(Value* v) : v_(v) {}  // NOLINT: implicit so {x, 1, None} reads naturally
  Arg(Literal l) : v_(std::move(l)) {}  // NOLINT
  template <typename T, typename = std::enable_if_t<std::is_constructible_v<Literal, T> &&
                                                    !std::is_convertible_v<T, Value*>>>
  Arg(T&& t) : v_(Literal(std::forward<T>(t))) {}  // NOLINT

  bool isValue() const { return std::holds_alternative<Value*>(v_); }
  bool isLiteral() const { return !isValue(); }
  Value* value() const { return isValue() ? std::get<Value*>(v_) : nullptr; }
  const Literal& literal() const { return std::get<Literal>(v_); }
  std::string str() const;

 private:
  std::variant<Value*, Literal> v_;
};

// Node attributes kept from TorchScript prim ops (e.g. prim::isinstance's
// types). Most operators have none: their arguments are all in `args`.
struct TypesAttr {
  std::vector<c10::TypePtr> types;
  bool isList = false;  // `tys` (a list) rather than `ty`
};
using AttrValue = std::variant<Literal, TypesAttr>;

class Node {
 public:
  Opcode opcode() const { return op_; }
  bool isCall() const { return op_ == Opcode::CallFunction; }
  // Operator name (`aten::conv2d`) for call_function; the constant name for
  // get_attr; empty otherwise.
  const std::string& target() const { return target_; }
  const std::string& overload() const { return overload_; }
  // `aten::add.Tensor` style: target plus overload when there is one.
  std::string qualifiedTarget() const;
  const c10::FunctionSchema* schema() const { return schema_; }
  void setSchema(const c10::FunctionSchema* s) { schema_ = s; }
  bool is(const char* qualifiedName) const { return op_ == Opcode::CallFunction && target_ == qualifiedName; }

  // Arguments.
  const std::vector<Arg>& args() const { return args_; }
  size_t numArgs() const { return args_.size(); }
  const Arg& arg(size_t i) const { return args_.at(i); }
  Value* argValue(size_t i) const { return args_.at(i).value(); }
  void setArg(size_t i, Arg a);
  void addArg(Arg a);
  void removeArg(size_t i);
  void removeAllArgs();
  // Index of the schema argument `name`, if the node has a schema.
  std::optional<size_t> argIndex(const std::string& name) const;
  // Test hook: sets an argument without touching use lists.
  void setArgUnchecked(size_t i, Arg a) { args_.at(i) = std::move(a); }

  // Outputs.
  const std::vector<std::unique_ptr<Value>>& outputs() const { return outputs_; }
  size_t numOutputs() const { return outputs_.size(); }
  Value* output(size_t i = 0) const { return outputs_.at(i).get(); }
  Value* addOutput(c10::TypePtr type, const std::string& name = "");
  void eraseOutput(size_t i);  // the output must be unused

  // Nested blocks (prim::If, prim::Loop).
  const std::vector<std::unique_ptr<Block>>& blocks() const { return blocks_; }
  Block* block(size_t i) const { return blocks_.at(i).get(); }
  Block* addBlock();

  // TorchScript attributes other than arguments (rare; see TypesAttr).
  const std::vector<std::pair<std::string, AttrValue>>& attrs() const { return attrs_; }
  void setAttr(const std::string& name, AttrValue v);
  const AttrValue* attr(const std::string& name) const;

  // Module scope (e.g. `layer1.0.conv1`) when the source knew it; debug only.
  const std::string& scope() const { return scope_; }
  void setScope(std::string s) { scope_ = std::move(s); }
  // `file.py:line` of the Python source the node came from, when known.
  const std::string& sourceLocation() const { return sourceLocation_; }
  void setSourceLocation(std::string s) { sourceLocation_ = std::move(s); }
  // How a pass made this node, for drawings and reports (e.g. `conv1 <-
  // fold(conv1, bn1)`); empty for nodes as imported. Debug only: not part of
  // the text form, never read by passes.
  const std::string& provenance() const { return provenance_; }
  void setProvenance(std::string s) { provenance_ = std::move(s); }

  // Position.
  Block* owningBlock() const { return owner_; }
  Node* next() const { return next_; }
  Node* prev() const { return prev_; }
  bool isAttached() const { return owner_ != nullptr; }
  void insertBefore(Node* n);
  void insertAfter(Node* n);
  void moveBefore(Node* n);
  void moveAfter(Node* n);
  // True when this node comes before `n` in the same block (linear walk:
  // use sparingly).
  bool isBefore(const Node* n) const;
  // The ancestor of this node (or itself) that lives in `b`, or nullptr.
  Node* ancestorIn(const Block* b) const;

  // Erases this node: it must have no used outputs. Drops its argument uses
  // and erases nested blocks.
  void destroy();
  // Test hook: unlinks the node from its block without dropping its argument
  // uses (so they dangle) and without freeing it.
  void detachUnchecked();

  Graph& graph() const { return *graph_; }

 private:
  friend class Graph;
  friend class Block;
  friend class Value;
  Node(Graph* g, Opcode op, std::string target, std::string overload)
      : graph_(g), op_(op), target_(std::move(target)), overload_(std::move(overload)) {}
  void unlink();

  Graph* graph_;
  Opcode op_;
  std::string target_;
  std::string overload_;
  const c10::FunctionSchema* schema_ = nullptr;
  std::vector<Arg> args_;
  std::vector<std::unique_ptr<Value>> outputs_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<std::pair<std::string, AttrValue>> attrs_;
  std::string scope_;
  std::string sourceLocation_;
  std::string provenance_;
  Block* owner_ = nullptr;
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
  size_t poolIndex_ = 0;
};

class Block {
 public:
  class iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using pointer = Node**;
    using reference = Node*;
    iterator() = default;
    iterator(Node* n, const Block* b) : n_(n), b_(b) {}
    Node* operator*() const { return n_; }
    iterator& operator++() { n_ = n_->next(); return *this; }
    iterator operator++(int) { auto t = *this; ++*this; return t; }
    iterator& operator--() { n_ = n_ ? n_->prev() : b_->last(); return *this; }
    bool operator==(const iterator& o) const { return n_ == o.n_; }
    bool operator!=(const iterator& o) const { return n_ != o.n_; }
   private:
    Node* n_ = nullptr;
    const Block* b_ = nullptr;
  };
  iterator begin() const { return {first_, this}; }
  iterator end() const { return {nullptr, this}; }
  Node* first() const { return first_; }
  Node* last() const { return last_; }
  size_t size() const { return size_; }
  // Safe to erase the current node while iterating: nodes() copies the list.
  std::vector<Node*> nodes() const;

  // The `output` node (always last once the block is complete).
  Node* outputNode() const;
  std::vector<Value*> outputValues() const;

  const std::vector<std::unique_ptr<Value>>& params() const { return params_; }
  Value* param(size_t i) const { return params_.at(i).get(); }
  Value* addParam(c10::TypePtr type, const std::string& name = "");
  void eraseParam(size_t i);  // the parameter must be unused

  Node* owningNode() const { return owningNode_; }
  Graph& graph() const { return *graph_; }
  void appendNode(Node* n);
  void prependNode(Node* n);

 private:
  friend class Node;
  friend class Graph;
  Block(Graph* g, Node* owningNode) : graph_(g), owningNode_(owningNode) {}
  Graph* graph_;
  Node* owningNode_;
  std::vector<std::unique_ptr<Value>> params_;
  Node* first_ = nullptr;
  Node* last_ = nullptr;
  size_t size_ = 0;
};

// Named constants (parameters and buffers) shared by the graphs of a model.
class ConstantTable {
 public:
  bool contains(const std::string& name) const { return values_.count(name) != 0; }
  const c10::IValue& at(const std::string& name) const;
  at::Tensor tensor(const std::string& name) const { return at(name).toTensor(); }
  void set(const std::string& name, c10::IValue v) { values_[name] = std::move(v); }
  void erase(const std::string& name) { values_.erase(name); }
  // A name not yet used, derived from `base` (`base`, `base.1`, ...).
  std::string uniqueName(const std::string& base) const;
  const std::map<std::string, c10::IValue>& entries() const { return values_; }
  size_t size() const { return values_.size(); }

 private:
  std::map<std::string, c10::IValue> values_;
  mutable std::unordered_map<std::string, size_t> nextSuffix_;  // uniqueName's resume points
};

class Graph {
 public:
  explicit Graph(std::shared_ptr<ConstantTable> constants = nullptr);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Block* block() const { return block_.get(); }
  ConstantTable& constants() const { return *constants_; }
  std::shared_ptr<ConstantTable> sharedConstants() const { return constants_; }

  // Inputs in order (the outputs of the placeholder nodes).
  std::vector<Value*> inputs() const;
  std::vector<Value*> outputs() const { return block_->outputValues(); }

  // Creation. New nodes are detached: insert them with Node::insertBefore /
  // insertAfter / Block::appendNode, or create them through a Builder.
  Node* createNode(Opcode op, const std::string& target = "", const std::string& overload = "");
  // call_function with resolved schema (when the operator has one) and
  // outputs typed `outputTypes`.
  Node* createCall(const std::string& qualifiedTarget, std::vector<Arg> args,
                   std::vector<c10::TypePtr> outputTypes);
  Value* addInput(c10::TypePtr type, const std::string& name);
  // get_attr node for constant `name`, placed after the placeholders (and
  // after the other get_attr nodes). The constant need not exist yet.
  Node* createGetAttr(const std::string& name, c10::TypePtr type);

  // Names: unique per graph. `base` empty gives a number.
  std::string uniqueValueName(const std::string& base);
  Value* findValue(const std::string& name) const;

  // Named types (NamedTuples, classes) seen at import, for the text parser.
  std::map<std::string, c10::TypePtr>& namedTypes() { return namedTypes_; }
  const std::map<std::string, c10::TypePtr>& namedTypes() const { return namedTypes_; }

  // Number of nodes in all blocks (excluding detached ones).
  size_t numNodes() const;
  // Applies `f` to every node, nested blocks included, in program order.
  void walk(const std::function<void(Node*)>& f) const;

  std::string str() const;  // the text form (text.h)

 private:
  friend class Node;
  friend class Value;
  friend class Block;
  void releaseNode(Node* n);
  void registerName(Value* v, const std::string& base);
  void unregisterName(Value* v);

  std::shared_ptr<ConstantTable> constants_;
  std::unique_ptr<Block> block_;
  std::vector<std::unique_ptr<Node>> pool_;
  std::unordered_map<std::string, Value*> names_;
  std::unordered_map<std::string, size_t> nameCounters_;
  std::map<std::string, c10::TypePtr> namedTypes_;
  size_t nextId_ = 0;
};

// Deep copy of a graph (same names, metadata and constant table).
// `constants` replaces the constant table (default: share g's).
std::unique_ptr<Graph> cloneGraph(const Graph& g, std::shared_ptr<ConstantTable> constants = nullptr);

// Looks up the registered operator schema for `aten::add` + `Tensor`.
const c10::FunctionSchema* findSchema(const std::string& target, const std::string& overload);
// Splits `aten::add.Tensor` into (`aten::add`, `Tensor`).
std::pair<std::string, std::string> splitQualifiedTarget(const std::string& s);

// Inserts nodes at a fixed point (before `before`, or at the end of a block).
class Builder {
 public:
  explicit Builder(Node* before) : block_(before->owningBlock()), before_(before) {}
  explicit Builder(Block* atEnd) : block_(atEnd), before_(nullptr) {}
  Node* insert(Node* n);
  // Creates and inserts a call; returns its first output.
  Value* call(const std::string& qualifiedTarget, std::vector<Arg> args,
              c10::TypePtr outputType = c10::TensorType::get());
  Node* callNode(const std::string& qualifiedTarget, std::vector<Arg> args,
                 std::vector<c10::TypePtr> outputTypes);
  Graph& graph() const { return block_->graph(); }

 private:
  Block* block_;
  Node* before_;
};

// `%name`: how the text form and messages refer to a value.
inline std::string valueRef(const Value* v) { return "%" + v->name(); }

}  // namespace ptopt::ir
