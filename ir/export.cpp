// ptopt IR -> TorchScript module (see model.h for the contract).
#include "ir/model.h"
#include "ir/qdq_ops.h"

#include "ir/load_time.h"
#include "ir/torch_compat.h"

#include <torch/csrc/jit/ir/ir.h>

#include <atomic>
#include <csignal>
#include <signal.h>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <future>
#include <map>
#include <random>
#include <unistd.h>
#include <set>
#include <sstream>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ptopt::ir {

namespace ts = torch::jit;

namespace {

std::string sanitizeSegment(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out.empty() ? "_" : out;
}

std::vector<std::string> splitPath(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    parts.push_back(sanitizeSegment(name.substr(start, dot - start)));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

}  // namespace

const std::string* statePath(const Node& n) {
  const bool read = n.is("prim::GetAttr") && n.numArgs() == 0;
  const bool write = n.is("prim::SetAttr") && n.numArgs() == 1;
  if (!read && !write) return nullptr;
  const AttrValue* name = n.attr("name");
  const Literal* lit = name ? std::get_if<Literal>(name) : nullptr;
  return lit && lit->is<std::string>() ? &lit->as<std::string>() : nullptr;
}

namespace {

// Holds the constants a model uses as module attributes.
//
// Flat (the default): every constant is an attribute of the root module under
// its full dotted name (`getattr(self, "layer1.0.conv1.weight")`): one
// prim::GetAttr per constant per call, and state_dict() keys equal to the
// nested layout's. Nested: a tree of submodules named after the path
// (`self.layer1[0].conv1.weight`), which costs a GetAttr per path segment on
// every call (measured: 3,000 per call on a 500-layer conv-bn stack, ~5% of
// its CPU time). Either way the names survive a second import.
// A flat root with more than ExportOptions::maxRootConstants constants holds
// them in ConstantBuckets instead (`self.ptopt_constants_3`), read once per
// call each: LibTorch's attribute searches are linear in a class's size.
// Submodules with the same attributes share one class type, as in the
// original model: serialization cost grows with the number of distinct
// classes, so one class per submodule would make saving quadratic.
class AttributeTree {
 public:
  AttributeTree(std::shared_ptr<torch::jit::CompilationUnit> cu, torch::jit::Module root,
                const ConstantTable& constants, const std::set<std::string>& used,
                const std::set<std::string>& state, const std::map<std::string, c10::TypePtr>& declared,
                bool nested, size_t maxRootConstants, size_t bucketSize)
      : cu_(std::move(cu)), nested_(nested) {
    for (const auto& name : used) {
      insert(name, constants.at(name), state.count(name) != 0);
      if (state.count(name)) stateNames_.insert(name);
      // A state attribute keeps the type it was declared with (an
      // Optional[List[float]] that holds None now holds a list later).
      auto d = declared.find(name);
      if (d != declared.end() && !constants.at(name).isTensor() && constants.at(name).type()->isSubtypeOf(*d->second))
        declaredTypes_[&constants.at(name)] = d->second;
    }
    if (!nested_ && root_.children.size() > maxRootConstants) spreadOverBuckets(std::max<size_t>(bucketSize, 1));
    signature(root_);
    build(root_, std::move(root), "");
  }

  const std::vector<std::string>& path(const std::string& name) const { return paths_.at(name); }
  // The type of the attribute at a dotted prefix of a path (`layer1.0`).
  const c10::TypePtr& typeAt(const std::string& prefix) const { return prefixTypes_.at(prefix); }

 private:
  struct TreeNode {
    std::map<std::string, std::unique_ptr<TreeNode>> children;
    const c10::IValue* value = nullptr;
    size_t signature = 0;
    bool bucket = false;  // a ConstantBucket (see ExportOptions::maxRootConstants)
  };

  // Module state (assigned by prim::SetAttr) needs a Python identifier as
  // its last segment: TorchScript prints an assignment as `obj.name = v`.
  void insert(const std::string& name, const c10::IValue& value, bool state) {
    std::vector<std::string> segments = nested_ ? splitPath(name)
                                        : std::vector<std::string>{state ? sanitizeSegment(name) : name};
    if (!tryInsert(segments, value)) {
      // Clashes with another constant's path: a flat name at the root.
      std::string flat = "_" + sanitizeSegment(name);
      while (root_.children.count(flat)) flat += "_";
      segments = {flat};
      tryInsert(segments, value);
    }
    paths_[name] = segments;
  }

  // Moves the root's constants (not module state, which stays where Python
  // code would look for it) into buckets of `bucketSize`, in name
  // order, and prefixes their paths with the bucket's name.
  void spreadOverBuckets(size_t bucketSize) {
    std::map<std::string, std::unique_ptr<TreeNode>> kept;
    std::vector<std::pair<std::string, std::unique_ptr<TreeNode>>> moved;
    std::unordered_map<std::string, std::string> owner;  // path segment -> constant name
    for (const auto& [name, segments] : paths_) owner[segments.front()] = name;
    for (auto& [segment, child] : root_.children) {
      auto o = owner.find(segment);
      if (o != owner.end() && !stateNames_.count(o->second)) moved.emplace_back(segment, std::move(child));
      else kept.emplace(segment, std::move(child));
    }
    root_.children = std::move(kept);
    TreeNode* node = nullptr;
    std::string bucket;
    for (size_t i = 0; i < moved.size(); ++i) {
      if (i % bucketSize == 0) {
        bucket = kConstantBucketPrefix + std::to_string(i / bucketSize);
        while (root_.children.count(bucket)) bucket += "_";  // a kept name that looks like a bucket's
        auto& created = root_.children[bucket];
        created = std::make_unique<TreeNode>();
        created->bucket = true;
        node = created.get();
      }
      auto& segments = paths_.at(owner.at(moved[i].first));
      segments.insert(segments.begin(), bucket);
      node->children.emplace(std::move(moved[i].first), std::move(moved[i].second));
    }
  }

  bool tryInsert(const std::vector<std::string>& segments, const c10::IValue& value) {
    TreeNode* cur = &root_;
    for (size_t i = 0; i < segments.size(); ++i) {
      if (cur->value || segments[i] == "training") return false;
      auto& child = cur->children[segments[i]];
      if (!child) child = std::make_unique<TreeNode>();
      cur = child.get();
    }
    if (cur->value || !cur->children.empty()) return false;
    cur->value = &value;
    return true;
  }

  // Interns the structure of a subtree: equal ids mean one class type fits both.
  size_t signature(TreeNode& node) {
    std::string sig;
    if (node.value) {
      auto d = declaredTypes_.find(node.value);
      sig = node.value->isTensor() ? "T"
            : "A:" + (d != declaredTypes_.end() ? d->second : node.value->type())->annotation_str();
    } else {
      sig = node.bucket ? "B{" : "M{";
      for (auto& [name, child] : node.children) sig += name + "=" + std::to_string(signature(*child)) + ";";
      sig += "}";
    }
    auto [it, inserted] = signatureIds_.emplace(sig, signatureIds_.size());
    return node.signature = it->second;
  }

  void build(const TreeNode& node, torch::jit::Module module, const std::string& prefix) {
    module.register_attribute("training", c10::BoolType::get(), false);
    for (const auto& [name, child] : node.children) {
      const std::string childPrefix = prefix.empty() ? name : prefix + "." + name;
      if (child->value) {
        auto declaredIt = declaredTypes_.find(child->value);
        const c10::TypePtr type = child->value->isTensor()           ? c10::TensorType::get()
                                  : declaredIt != declaredTypes_.end() ? declaredIt->second
                                                                       : child->value->type();
        prefixTypes_[childPrefix] = type;
        if (child->value->isTensor()) module.register_buffer(name, child->value->toTensor());
        else module.register_attribute(name, type, *child->value);
        continue;
      }
      auto typeIt = classes_.find(child->signature);
      torch::jit::Module sub = typeIt == classes_.end()
          ? torch::jit::Module(c10::QualifiedName(std::string("__torch__.ptopt.") +
                                                  (child->bucket ? kConstantBucketClass : "Submodule")),
                               cu_, /*shouldMangle=*/true)
          : torch::jit::Module(cu_, typeIt->second);
      classes_.emplace(child->signature, sub.type());
      prefixTypes_[childPrefix] = sub.type();
      build(*child, sub, childPrefix);
      module.register_module(name, sub);
    }
  }

  std::shared_ptr<torch::jit::CompilationUnit> cu_;
  bool nested_;
  TreeNode root_;
  std::unordered_map<std::string, std::vector<std::string>> paths_;
  std::unordered_map<std::string, size_t> signatureIds_;
  std::unordered_map<size_t, c10::ClassTypePtr> classes_;
  std::unordered_map<std::string, c10::TypePtr> prefixTypes_;
  std::unordered_map<const c10::IValue*, c10::TypePtr> declaredTypes_;
  std::set<std::string> stateNames_;
};

bool isLoadTimeName(const std::string& name) {
  const std::string prefix = std::string(kLoadTimeModule) + ".";
  return name.compare(0, prefix.size(), prefix) == 0;
}

class GraphEmitter {
 public:
  // `loadTime`: the class of the load-time values' holder (ir/load_time.h), if any.
  GraphEmitter(const Graph& graph, const c10::ClassTypePtr& cls, const AttributeTree& attrs,
               c10::ClassTypePtr loadTime = nullptr)
      : ir_(graph), cls_(cls), attrs_(attrs), loadTime_(std::move(loadTime)) {}

  std::shared_ptr<ts::Graph> emit() {
    out_ = std::make_shared<ts::Graph>();
    self_ = out_->addInput("self");
    self_->setType(cls_);
    for (Value* in : ir_.inputs()) {
      ts::Value* v = out_->addInput();
      v->setType(in->type());
      // The argument's own name (`x`, not TorchScript's `x.1`): the schema,
      // and so keyword calls (`m(x, bias=b)`), use it.
      std::string name = in->name();
      const auto dot = name.rfind('.');
      if (dot != std::string::npos && dot > 0 && dot + 1 < name.size() &&
          name.find_first_not_of("0123456789", dot + 1) == std::string::npos)
        name.resize(dot);
      setName(v, name);
      env_[in] = v;
    }
    // First the pooled constants and attribute reads, then the body, both
    // appended in order: TorchScript renumbers a whole block when many nodes
    // are inserted at one point in the middle, which is quadratic.
    hoistConstants(*ir_.block());
    emitBlock(*ir_.block(), out_->block());
    // No Graph::lint() here: it is quadratic on wide graphs; the saved file
    // is reloaded before it replaces anything (saveModuleAtomically).
    return out_;
  }

 private:
  // TorchScript's Python printer uniquifies names that share a base
  // (`input.1`, `input.2`, ...) with a search that is quadratic in their
  // count, so exported values get distinct identifiers (`input_1`) instead.
  void setName(ts::Value* v, const std::string& name) {
    std::string id = sanitizeSegment(name);
    if (std::isdigit(static_cast<unsigned char>(id[0]))) id = "v" + id;
    for (std::string base = id; !usedNames_.insert(id).second;)
      id = base + "_" + std::to_string(nameCounter_++);
    v->setDebugName(id);
  }

  void hoistConstants(const Block& b) {
    for (const Node* n : b) {
      if (n->opcode() == Opcode::GetAttr) attribute(n->target());
      if (const std::string* state = statePath(*n)) stateOwner(*state);
      for (const Arg& a : n->args())
        if (a.isLiteral()) literal(a.literal());
      for (const auto& nested : n->blocks()) hoistConstants(*nested);
    }
  }

  ts::Value* literal(const Literal& l) {
    const std::string key = l.type()->str() + "|" + l.str();
    auto it = pool_.find(key);
    if (it != pool_.end()) return it->second;
    return pool_[key] = out_->insertConstant(l.toIValue());
  }

  ts::Value* attribute(const std::string& name) {
    auto it = attrValues_.find(name);
    if (it != attrValues_.end()) return it->second;
    if (isLoadTimeName(name)) return attrValues_[name] = loadTimeValue(name);
    ts::Value* cur = self_;
    std::string prefix;
    for (const auto& seg : attrs_.path(name)) {
      prefix += (prefix.empty() ? "" : ".") + seg;
      auto cached = prefixValues_.find(prefix);
      if (cached != prefixValues_.end()) { cur = cached->second; continue; }
      // Built by hand: Graph::insertGetAttr looks the type up with a linear
      // search over the class's attributes (quadratic for wide modules).
      ts::Node* get = out_->insertNode(out_->create(c10::prim::GetAttr, {cur}, 1));
      get->s_(c10::attr::name, seg);
      cur = get->output();
      cur->setType(attrs_.typeAt(prefix));
      setName(cur, "self_" + prefix);
      prefixValues_[prefix] = cur;
    }
    return attrValues_[name] = cur;
  }

  // `self.ptopt_load_time.v<i>`: a value computed when the model loads.
  ts::Value* loadTimeValue(const std::string& name) {
    if (!loadTime_) throw std::logic_error("export: " + name + " is read but no load-time values were hoisted");
    auto holder = prefixValues_.find(kLoadTimeModule);
    if (holder == prefixValues_.end()) {
      ts::Node* get = out_->insertNode(out_->create(c10::prim::GetAttr, {self_}, 1));
      get->s_(c10::attr::name, kLoadTimeModule);
      get->output()->setType(loadTime_);
      setName(get->output(), std::string("self_") + kLoadTimeModule);
      holder = prefixValues_.emplace(kLoadTimeModule, get->output()).first;
    }
    ts::Node* get = out_->insertNode(out_->create(c10::prim::GetAttr, {holder->second}, 1));
    const std::string attr = name.substr(std::string(kLoadTimeModule).size() + 1);
    get->s_(c10::attr::name, attr);
    get->output()->setType(loadTime_->getAttribute(attr));  // a tensor, or a packed-conv object
    setName(get->output(), "self_" + name);
    return get->output();
  }

  // The module that holds state attribute `name` (self, or a submodule in
  // the nested layout), read once at the top like the constants.
  ts::Value* stateOwner(const std::string& name) {
    const auto& segments = attrs_.path(name);
    ts::Value* cur = self_;
    std::string prefix;
    for (size_t i = 0; i + 1 < segments.size(); ++i) {
      prefix += (prefix.empty() ? "" : ".") + segments[i];
      auto cached = prefixValues_.find(prefix);
      if (cached != prefixValues_.end()) { cur = cached->second; continue; }
      ts::Node* get = out_->insertNode(out_->create(c10::prim::GetAttr, {cur}, 1));
      get->s_(c10::attr::name, segments[i]);
      cur = get->output();
      cur->setType(attrs_.typeAt(prefix));
      setName(cur, "self_" + prefix);
      prefixValues_[prefix] = cur;
    }
    return cur;
  }

  // A read or write of module state: emitted where it is, on its owner.
  void emitState(const Node& n, const std::string& name, ts::Block* tb) {
    ts::Value* owner = stateOwner(name);
    ts::Node* node = nullptr;
    if (n.target() == "prim::GetAttr") {
      node = out_->create(c10::prim::GetAttr, {owner}, 1);
      node->output()->setType(n.output()->type());
      setName(node->output(), n.output()->name());
      env_[n.output()] = node->output();
    } else {
      node = out_->create(c10::prim::SetAttr, {owner, valueOf(n.arg(0))}, 0);
    }
    node->s_(c10::attr::name, attrs_.path(name).back());
    tb->appendNode(node);
  }

  ts::Value* valueOf(const Arg& a) { return a.isValue() ? env_.at(a.value()) : literal(a.literal()); }

  void emitBlock(const Block& b, ts::Block* tb) {
    for (const Node* n : b) {
      switch (n->opcode()) {
        case Opcode::Placeholder: break;
        case Opcode::GetAttr: env_[n->output()] = attribute(n->target()); break;
        case Opcode::Output: emitOutputs(*n, tb); break;
        case Opcode::CallFunction: emitCall(*n, tb); break;
      }
    }
  }

  void emitOutputs(const Node& n, ts::Block* tb) {
    const bool top = tb == out_->block();
    if (top && n.numArgs() != 1) {
      // A TorchScript method returns one value: pack several into a tuple.
      std::vector<ts::Value*> values;
      for (const Arg& a : n.args()) values.push_back(valueOf(a));
      ts::Node* tuple = out_->createTuple(values);
      tb->appendNode(tuple);
      tb->registerOutput(tuple->output());
      return;
    }
    for (const Arg& a : n.args()) tb->registerOutput(valueOf(a));
  }

  void emitCall(const Node& n, ts::Block* tb) {
    if (const std::string* state = statePath(n)) return emitState(n, *state, tb);
    std::vector<ts::Value*> inputs;
    for (const Arg& a : n.args()) inputs.push_back(valueOf(a));
    ts::Node* node = out_->create(c10::Symbol::fromQualString(n.target()), inputs, n.numOutputs());
    for (size_t i = 0; i < n.numOutputs(); ++i) {
      node->output(i)->setType(n.output(i)->type());
      setName(node->output(i), n.output(i)->name());
      env_[n.output(i)] = node->output(i);
    }
    for (const auto& [key, value] : n.attrs()) setAttribute(node, key, value);
    if (n.is("aten::warn")) node->setSourceRange(warningRange(n.sourceLocation()));
    tb->appendNode(node);
    for (const auto& nested : n.blocks()) {
      ts::Block* sub = node->addBlock();
      for (const auto& p : nested->params()) {
        ts::Value* v = sub->addInput();
        v->setType(p->type());
        setName(v, p->name());
        env_[p.get()] = v;
      }
      emitBlock(*nested, sub);
    }
  }

  // The interpreter reads a warning's location from its node's source range
  // and dereferences it (LibTorch 1.13 and 2.x): a node without one crashes
  // the process when it warns. A saved file gets ranges from its code; an
  // in-memory export (--verify-each, --tune's timing) needs one here: the
  // original's `file.py:line` where the import knew it.
  static ts::SourceRange warningRange(const std::string& location) {
    const size_t colon = location.rfind(':');
    std::optional<std::string> file;
    size_t line = 0;
    if (colon != std::string::npos && colon > 0) {
      try {
        line = std::stoul(location.substr(colon + 1));
        file = location.substr(0, colon);
      } catch (const std::exception&) {
        file.reset();
      }
    }
    auto source = std::make_shared<ts::Source>(location.empty() ? std::string("warn") : location,
                                               file ? compat::TorchOptional<std::string>(*file) : compat::kTorchNullopt, line);
    return ts::SourceRange(source, 0, source->size());
  }

  static void setAttribute(ts::Node* node, const std::string& key, const AttrValue& value) {
    const c10::Symbol name = c10::Symbol::attr(key);
    if (const auto* types = std::get_if<TypesAttr>(&value)) {
      if (types->isList) node->tys_(name, types->types);
      else node->ty_(name, types->types.at(0));
      return;
    }
    const auto& lit = std::get<Literal>(value);
    if (lit.is<int64_t>()) node->i_(name, lit.as<int64_t>());
    else if (lit.is<double>()) node->f_(name, lit.as<double>());
    else if (lit.is<std::string>()) node->s_(name, lit.as<std::string>());
    else if (lit.is<std::vector<int64_t>>()) node->is_(name, lit.as<std::vector<int64_t>>());
    else if (lit.is<std::vector<double>>()) node->fs_(name, lit.as<std::vector<double>>());
    else if (lit.is<std::vector<std::string>>()) node->ss_(name, lit.as<std::vector<std::string>>());
    else throw std::runtime_error("cannot export attribute '" + key + "' = " + lit.str());
  }

  const Graph& ir_;
  c10::ClassTypePtr cls_;
  const AttributeTree& attrs_;
  c10::ClassTypePtr loadTime_;
  std::shared_ptr<ts::Graph> out_;
  ts::Value* self_ = nullptr;
  std::unordered_map<const Value*, ts::Value*> env_;
  std::unordered_map<std::string, ts::Value*> pool_;
  std::unordered_set<std::string> usedNames_;
  size_t nameCounter_ = 0;
  std::unordered_map<std::string, ts::Value*> attrValues_;
  std::unordered_map<std::string, ts::Value*> prefixValues_;
};

// The schema inferred from the graph has no default values: put back the
// ones the import kept on the placeholders (`targets: ... = None`).
void keepArgumentDefaults(const Graph& graph, torch::jit::Function& fn) {
  const c10::FunctionSchema& s = fn.getSchema();
  const auto inputs = graph.inputs();
  std::vector<c10::Argument> args;
  bool any = false;
  for (size_t i = 0; i < s.arguments().size(); ++i) {
    const c10::Argument& a = s.arguments()[i];
    compat::TorchOptional<c10::IValue> def;
    const AttrValue* attr = i >= 1 && i - 1 < inputs.size() ? inputs[i - 1]->node()->attr("default") : nullptr;
    if (const Literal* lit = attr ? std::get_if<Literal>(attr) : nullptr) def = lit->toIValue();
    any = any || def.has_value();
    args.emplace_back(a.name(), a.type(), a.N(), def, a.kwarg_only());
  }
  if (any)
    fn.setSchema(c10::FunctionSchema(s.name(), s.overload_name(), std::move(args), s.returns(), s.is_vararg(), s.is_varret()));
}

}  // namespace

namespace {

torch::jit::Module exportWith(const Model& model, const ExportOptions& options, const LoadTimeValues* loadTime) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module root(c10::QualifiedName("__torch__." + options.className), cu,
                          /*shouldMangle=*/true);
  std::set<std::string> used, state;
  std::map<std::string, c10::TypePtr> declared;  // state attributes' types as the graph reads them
  for (const auto& [name, graph] : model.methods)
    graph->walk([&](Node* n) {
      if (n->opcode() == Opcode::GetAttr && !isLoadTimeName(n->target())) used.insert(n->target());
      if (const std::string* path = statePath(*n)) {
        used.insert(*path);
        state.insert(*path);
        if (n->is("prim::GetAttr") && n->output()->type()) declared.emplace(*path, n->output()->type());
      }
    });
  AttributeTree attrs(cu, root, *model.constants, used, state, declared, options.nestedAttributes,
                      options.maxRootConstants, options.constantBucketSize);
  if (requiresCuda(model)) root.register_attribute(kRequiresCudaAttribute, c10::BoolType::get(), true);
  c10::ClassTypePtr holder;
  if (loadTime && !loadTime->empty()) {
    attachLoadTimeValues(root, cu, *loadTime);
    holder = root.attr(kLoadTimeModule).toModule().type();
  }
  for (const auto& [name, graph] : model.methods) {
    GraphEmitter emitter(*graph, root.type(), attrs, holder);
    auto tsGraph = emitter.emit();
    auto* fn = cu->create_function(c10::QualifiedName(*root.type()->name(), name), tsGraph);
    keepArgumentDefaults(*graph, *fn);
    root.type()->addMethod(fn);
  }
  return root;
}

}  // namespace

torch::jit::Module moduleOnDevice(const torch::jit::Module& module, c10::Device device) {
  bool there = true;
  for (const auto& p : module.parameters()) there = there && p.device() == device;
  for (const auto& b : module.buffers()) there = there && b.device() == device;
  if (there) return module;
  torch::jit::Module copy = module.deepcopy();
  copy.to(device);
  return copy;
}

torch::jit::Module exportModel(const Model& model, const ExportOptions& options) {
  // PT2E's Q/DQ ops, defined in Python only, as the ATen ops that define
  // them (ir/qdq_ops.h); on a copy.
  if (hasUnregisteredQdqOps(model)) {
    Model copy = model.clone();
    decomposeQdqOps(copy);
    return exportModel(copy, options);
  }
  // Values only a load can make (oneDNN's packed weights) move into a holder
  // that recomputes them in __setstate__ (ir/load_time.h); on a copy, since
  // that takes them out of the graphs.
  if (options.hoistLoadTimeValues && hasLoadTimeNodes(model)) {
    Model copy = model.clone();
    const LoadTimeValues loadTime = hoistLoadTimeValues(copy);
    return exportWith(copy, options, &loadTime);
  }
  return exportWith(model, options, nullptr);
}

bool requiresCuda(const Model& model) {
  bool cuda = false;
  for (const auto& [name, graph] : model.methods)
    graph->walk([&](Node* n) {
      const std::string& t = n->target();
      cuda = cuda || (n->isCall() && (t.rfind("aten::cudnn_", 0) == 0 || t.rfind("aten::miopen_", 0) == 0));
    });
  return cuda;
}

std::string serializeModule(const torch::jit::Module& module) {
  // Serialized into memory: LibTorch's zip writer, when a write to a file
  // fails (disk full), throws again from its destructor and the process
  // aborts. Writing the bytes ourselves turns that into a clean error.
  std::ostringstream buffer;
  module.save(buffer);
  return buffer.str();
}

torch::jit::Module loadSerializedModule(const std::string& bytes) {
  std::istringstream in(bytes);
  return torch::jit::load(in);
}

void saveModuleAtomically(const torch::jit::Module& module, const std::string& path) {
  AtomicModuleFile file(path);
  file.write(module);
  try {
    file.load();  // it must load back
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot write '" + path + "': " + torchErrorMessage(e));
  }
  file.commit();
}

namespace {

// Writes `size` bytes to `fd`, retrying short writes and EINTR; 0 or the
// errno of the failure (ENOSPC for a write that wrote nothing). Each write()
// gets at most 256 KiB: on ext4 here one write() of a 64 MB tensor into the
// page cache ran at 0.4-1.2 GB/s against 4 GB/s in 256 KiB pieces (the
// kernel's copy into large page-cache folios), and the extra system calls
// (4096 per GB) cost nothing measurable.
int writeFully(int fd, const char* data, size_t size) {
  constexpr size_t kPiece = 256u << 10;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, std::min(kPiece, size - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// A stream buffer over a file descriptor that remembers the first failed
// write instead of reporting it: the zip writer sees every byte accepted,
// finishes its archive normally, and the caller reports the error after.
class DeferredErrorFileBuf : public std::streambuf {
 public:
  explicit DeferredErrorFileBuf(int fd) : fd_(fd), buffer_(1 << 20) { setp(buffer_.data(), buffer_.data() + buffer_.size()); }
  int error() const { return error_; }
  uint64_t written() const { return written_; }
  bool flushAll() {
    writeAll(pbase(), static_cast<size_t>(pptr() - pbase()));
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return error_ == 0;
  }

 protected:
  int_type overflow(int_type c) override {
    flushAll();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    // Large records (tensor data) go straight to the file, not through the buffer.
    if (n >= static_cast<std::streamsize>(buffer_.size() / 2)) {
      flushAll();
      writeAll(s, static_cast<size_t>(n));
      return n;
    }
    return std::streambuf::xsputn(s, n);
  }
  int sync() override { return flushAll() ? 0 : -1; }

 private:
  void writeAll(const char* data, size_t size) {
    if (error_) return;
    if ((error_ = writeFully(fd_, data, size)) != 0) return;
    written_ += size;
    startWriteback();
  }

  // Asks the kernel to start writing each 64 MB to disk as soon as it is
  // written (sync_file_range: not a flush, it does not wait), so that the
  // disk works while the archive is still being serialized and the closing
  // fsync finds little left: for a 4 GB model the fsync alone would
  // otherwise be seconds at the disk's speed, after all the CPU work.
  void startWriteback() {
#ifdef __linux__
    constexpr uint64_t kStep = 64ull << 20;
    if (written_ - writebackStarted_ < kStep) return;
    ::sync_file_range(fd_, static_cast<off64_t>(writebackStarted_), static_cast<off64_t>(written_ - writebackStarted_),
                      SYNC_FILE_RANGE_WRITE);
    writebackStarted_ = written_;
#endif
  }

  int fd_;
  std::vector<char> buffer_;
  int error_ = 0;
  uint64_t written_ = 0;
  uint64_t writebackStarted_ = 0;  // bytes handed to startWriteback's writeback
};

std::string temporaryPathFor(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::random_device rd;
  return (dir / ("." + target.filename().string() + ".ptopt-tmp-" + std::to_string(rd()))).string();
}

// Temporary files in flight, removed by a signal that ends the process
// (Ctrl-C during a long verification of a big model must not leave gigabytes
// behind). The handler only calls unlink, which is async-signal-safe; paths
// are registered while their AtomicModuleFile owns them.
constexpr int kInFlightSlots = 16;
std::atomic<const char*> inFlight[kInFlightSlots];

extern "C" void removeTemporariesAndReraise(int signo) {
  for (auto& slot : inFlight)
    if (const char* path = slot.load()) ::unlink(path);
  ::signal(signo, SIG_DFL);
  ::raise(signo);
}

void registerTemporary(const char* path) {
  // Only where the signal would end the process as it is: a handler the
  // embedding program installed (Python's, a test framework's) is left alone,
  // and the temporary file is then removed by unwinding as usual.
  for (int signo : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction current {};
    if (::sigaction(signo, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
        current.sa_handler == SIG_DFL) {
      struct sigaction action {};
      action.sa_handler = removeTemporariesAndReraise;
      sigemptyset(&action.sa_mask);
      ::sigaction(signo, &action, nullptr);
    }
  }
  for (auto& slot : inFlight) {
    const char* expected = nullptr;
    if (slot.compare_exchange_strong(expected, path)) return;
  }
}

void unregisterTemporary(const char* path) {
  for (auto& slot : inFlight) {
    const char* expected = path;
    if (slot.compare_exchange_strong(expected, nullptr)) return;
  }
}

}  // namespace

AtomicModuleFile::AtomicModuleFile(std::string path) : path_(std::move(path)), tmp_(temporaryPathFor(path_)) {}

AtomicModuleFile::~AtomicModuleFile() {
  if (synced_.valid()) synced_.wait();
  if (written_ && !committed_) {
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
  }
  unregisterTemporary(tmp_.c_str());
}

void AtomicModuleFile::write(const torch::jit::Module& module) {
  writeWith([&module](std::ostream& out) { module.save(out); });
}

void AtomicModuleFile::write(const std::string& bytes) {
  writeWith([&bytes](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

void AtomicModuleFile::writeWith(const std::function<void(std::ostream&)>& produce) {
  // I/O failures are std::system_error ("cannot write 'PATH': ..."); a module
  // that does not serialize rethrows LibTorch's own error. Either way the
  // temporary file is gone.
  auto ioFailure = [this](int err, const std::string& what) {
    return std::system_error(err, std::generic_category(), "cannot write '" + path_ + "': " + what);
  };
  const int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw ioFailure(errno, "cannot create '" + tmp_ + "'");
  written_ = true;  // from here on the destructor (or a signal) removes it
  registerTemporary(tmp_.c_str());
  int err = 0;
  std::string what;
  std::exception_ptr serializeError;
  try {
    DeferredErrorFileBuf buf(fd);
    std::ostream out(&buf);
    produce(out);
    out.flush();
    if (!buf.flushAll()) err = buf.error(), what = "write failed";
    bytes_ = buf.written();
  } catch (const std::exception&) {
    serializeError = std::current_exception();
  }
  if (!err && !serializeError) {
    // Flushed to disk before it can replace anything (commit() waits), but on
    // another thread: the file loads back from the page cache at once, and
    // the disk works while the caller verifies and times the model (at 240
    // MB/s a 1 GB model's fsync is 4 s).
    synced_ = std::async(std::launch::async, [fd] {
      int e = ::fsync(fd) != 0 ? errno : 0;
      if (::close(fd) != 0 && !e) e = errno;
      return e;
    });
    return;
  }
  ::close(fd);
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
  written_ = false;
  if (serializeError) std::rethrow_exception(serializeError);
  throw ioFailure(err, what);
}

torch::jit::Module AtomicModuleFile::load() const { return torch::jit::load(tmp_); }

void AtomicModuleFile::commit() {
  namespace fs = std::filesystem;
  if (synced_.valid()) {
    if (const int err = synced_.get(); err != 0) {
      std::error_code ec;
      fs::remove(tmp_, ec);
      written_ = false;
      throw std::system_error(err, std::generic_category(), "cannot write '" + path_ + "': cannot flush to disk");
    }
  }
  try {
    if (fs::exists(path_)) fs::permissions(tmp_, fs::status(path_).permissions());
    fs::rename(tmp_, path_);
    committed_ = true;
    unregisterTemporary(tmp_.c_str());
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot write '" + path_ + "': " + torchErrorMessage(e));
  }
}

void writeModuleBytesAtomically(const std::string& bytes, const std::string& path, bool reload) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::random_device rd;
  const fs::path tmp = dir / ("." + target.filename().string() + ".ptopt-tmp-" + std::to_string(rd()));
  try {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot create '" + tmp.string() + "': " + std::strerror(errno));
    if (const int err = writeFully(fd, bytes.data(), bytes.size()); err != 0) {
      ::close(fd);
      throw std::runtime_error(std::string("write failed: ") + std::strerror(err));
    }
    // Flush the file to disk before it replaces anything.
    if (::fsync(fd) != 0) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error(std::string("cannot flush to disk: ") + std::strerror(err));
    }
    if (::close(fd) != 0) throw std::runtime_error(std::string("close failed: ") + std::strerror(errno));
    if (reload) torch::jit::load(tmp.string());  // it must load back
    if (fs::exists(target)) fs::permissions(tmp, fs::status(target).permissions());
    fs::rename(tmp, target);
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write '" + path + "': " + torchErrorMessage(e));
  }
}

}  // namespace ptopt::ir
