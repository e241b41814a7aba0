// TorchScript -> ptopt IR (see model.h for the contract).
#include "ir/model.h"
#include "ir/load_time.h"

#include "ir/dead_code.h"
#include "ir/mutation.h"
#include "ir/op_views.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::ir {

namespace ts = torch::jit;

// ---------------------------------------------------------------- freezing

namespace {

bool isModuleValue(const c10::IValue& v) {
  return v.isObject() && v.toObjectRef().type()->is_module();
}

std::string joinPath(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : name.empty() ? prefix : prefix + "." + name;
}

// `file.py:line` of the original Python source (through the debug info a
// saved module keeps), or of the serialized code; "" when unknown.
std::string sourceLocationOf(ts::Node* n) {
  ts::SourceRange range = n->sourceRange();
  if (auto original = range.findSourceRangeThatGenerated()) range = *original;
  auto loc = range.file_line_col();
  if (!loc) return "";
  return std::get<0>(*loc) + ":" + std::to_string(std::get<1>(*loc));
}

// The module path a node was inlined from (`layer1.0.relu`), read from
// TorchScript's inlined call stack: a method's optimized graph already has
// its submodules' calls inlined, so the import never sees those calls.
std::string scopeFromCallStack(ts::Node* n) {
  auto callstack = n->callstack();
  if (!callstack) return "";
  std::string path;
  for (const auto& entry : (*callstack)->vec()) {
    const auto& module = std::get<2>(entry);
    if (!module) continue;
    const std::string name = module->instance_name();
    // SELF: a method called on the module it belongs to (conv's _conv_forward).
    if (name.empty() || name == "INSTANCE_NAME_UNKNOWN" || name == "SELF") continue;
    path = joinPath(path, name);
  }
  return path;
}

bool isConstantBucket(const std::string& attributeName, const c10::ivalue::Object& module) {
  const auto type = module.type();
  return attributeName.rfind(kConstantBucketPrefix, 0) == 0 && type->name() &&
         type->name()->name() == kConstantBucketClass;
}

// What a TorchScript value maps to during conversion.
struct Binding {
  Value* value = nullptr;                   // an IR value, or
  std::optional<c10::IValue> constant;      // a literal constant, or
  c10::ivalue::Object* module = nullptr;    // a (sub)module, or
  torch::jit::Function* function = nullptr; // a function to inline
  std::string modulePath;
};

// Thrown when conversion meets the first assignment to a module attribute:
// the import starts over, treating that attribute as state.
struct RestartWithState {};

// The module's tensors met during an import: the constant each became (by
// TensorImpl), and which constants share storage with the module.
struct ModuleTensors {
  std::unordered_map<c10::TensorImpl*, std::string> names;
  std::set<std::string> shared;
};

// A dense tensor that starts its storage and fills it: sharing it shares
// nothing more than the tensor.
bool coversItsStorage(const at::Tensor& t) {
  if (!t.defined() || t.is_sparse() || t.is_quantized() || !t.has_storage() || t.storage_offset() != 0 ||
      !t.is_non_overlapping_and_dense())
    return false;
  return t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
}

// Norms whose running statistics the kernel updates in place while it
// normalizes by batch statistics; their schemas do not mark the write.
std::vector<Value*> runningStatsWritten(Node* n) {
  static const std::set<std::string> norms = {"aten::batch_norm", "aten::instance_norm", "aten::native_batch_norm",
                                              "aten::_batch_norm_impl_index", "aten::_native_batch_norm_legit"};
  if (n->opcode() != Opcode::CallFunction || !norms.count(n->target())) return {};
  const OpView view = OpView::of(n);
  const char* flag = view.has("training") ? "training" : "use_input_stats";
  if (view.has(flag) && view.boolArg(flag) == std::optional<bool>(false)) return {};
  std::vector<Value*> out;
  for (const char* stat : {"running_mean", "running_var"})
    if (view.has(stat) && !view.isNone(stat)) out.push_back(view.value(stat));
  return out;
}

// Constants shared with the module that the model may write when it runs
// (ir::MutationAnalysis, plus the running statistics of norms in training
// mode) get their own copy, so that running the original (the reference)
// never changes the IR, nor a pass the original. A written value that is
// not a get_attr of its own copies every shared constant (rare).
// A list constant that holds a copied tensor (a scripted RNN's
// `_flat_weights` holds its weight attributes) gets a new list with the copy
// in its place: an in-place write through either name then reaches the
// other, as in the module, and running the module leaves the list as
// imported. The module's own list is not touched.
// `copies`: the module's tensor (by its data pointer) -> the IR's own copy.
void replaceCopiedListElements(ConstantTable& constants,
                               const std::map<const void*, std::pair<at::Tensor, at::Tensor>>& copies) {
  if (copies.empty()) return;
  // The same tensor: the same data, shape, strides and dtype (the import's
  // constant may be another Tensor object over the module's storage).
  auto copyOf = [&](const c10::IValue& e) -> std::optional<at::Tensor> {
    if (!e.isTensor() || !e.toTensor().defined()) return std::nullopt;
    const at::Tensor& t = e.toTensor();
    auto it = copies.find(t.data_ptr());
    if (it == copies.end()) return std::nullopt;
    const at::Tensor& original = it->second.first;
    if (t.sizes() != original.sizes() || t.strides() != original.strides() || t.dtype() != original.dtype())
      return std::nullopt;
    return it->second.second;
  };
  std::vector<std::pair<std::string, c10::IValue>> replaced;
  for (const auto& [name, value] : constants.entries()) {
    if (!value.isList()) continue;
    const c10::List<c10::IValue> list = value.toList();
    bool holdsCopy = false;
    for (const c10::IValue& e : list) holdsCopy = holdsCopy || copyOf(e).has_value();
    if (!holdsCopy) continue;
    c10::impl::GenericList fresh(list.elementType());
    for (const c10::IValue& e : list) {
      auto own = copyOf(e);
      fresh.push_back(own ? c10::IValue(*own) : e);
    }
    replaced.emplace_back(name, c10::IValue(std::move(fresh)));
  }
  for (auto& [name, value] : replaced) constants.set(name, std::move(value));
}

void copyWrittenConstants(Model& model, const std::set<std::string>& shared) {
  if (shared.empty()) return;
  std::set<std::string> copy;
  bool copyAll = false;
  for (const auto& [name, graph] : model.methods) {
    const MutationAnalysis mutation(*graph);
    copy.insert(mutation.writtenConstants().begin(), mutation.writtenConstants().end());
    graph->walk([&](Node* n) {
      for (Value* stat : runningStatsWritten(n)) {
        Node* producer = stat ? stat->node() : nullptr;
        if (producer && producer->opcode() == Opcode::GetAttr) copy.insert(producer->target());
        else copyAll = true;
      }
    });
  }
  std::map<const void*, std::pair<at::Tensor, at::Tensor>> copies;  // data -> (the module's tensor, the IR's copy)
  for (const std::string& name : copyAll ? shared : copy)
    if (shared.count(name)) {
      const at::Tensor original = model.constants->tensor(name);
      at::Tensor own = original.clone(at::MemoryFormat::Preserve);
      if (original.defined() && original.numel() > 0) copies[original.data_ptr()] = {original, own};
      model.constants->set(name, own);
    }
  replaceCopiedListElements(*model.constants, copies);
}

class Converter {
 public:
  Converter(Model& model, const torch::jit::Module& root, ModuleTensors& tensors, std::set<std::string>& statePaths)
      : model_(model), root_(root), tensors_(tensors), statePaths_(statePaths) {}

  std::unique_ptr<Graph> convert(ts::Graph& tsGraph, const std::string& method) {
    method_ = method;
    graph_ = std::make_unique<Graph>(model_.constants);
    auto inputs = tsGraph.inputs();
    env_[inputs[0]].module = root_._ivalue().get();
    // Default values of the method's arguments (`targets=None`) stay on the
    // placeholders as a `default` attribute, so the export keeps them.
    const auto tsMethod = root_.find_method(method_);
    const c10::FunctionSchema* schema = tsMethod ? &tsMethod->function().getSchema() : nullptr;
    for (size_t i = 1; i < inputs.size(); ++i) {
      Value* v = graph_->addInput(normalizeType(inputs[i]->type()), inputs[i]->debugName());
      env_[inputs[i]].value = v;
      prologueTail_ = v->node();
      if (schema && i < schema->arguments().size() && schema->arguments()[i].default_value())
        if (auto lit = Literal::fromIValue(*schema->arguments()[i].default_value(), inputs[i]->type()))
          v->node()->setAttr("default", *lit);
    }
    convertBlock(tsGraph.block(), graph_->block());
    return std::move(graph_);
  }

 private:
  c10::TypePtr normalizeType(const c10::TypePtr& t) {
    recordNamedTypes(t);
    return c10::unshapedType(t);
  }

  void recordNamedTypes(const c10::TypePtr& t) {
    if (!t) return;
    if (auto named = t->cast<c10::NamedType>())
      if (named->name()) graph_->namedTypes()[named->name()->qualifiedName()] = t;
    for (const auto& c : t->containedTypes()) recordNamedTypes(c);
  }

  [[noreturn]] void unsupported(ts::Node* n, const std::string& why) {
    std::string where;
    if (n->sourceRange().source()) {
      std::ostringstream os;
      n->sourceRange().highlight(os);
      where = "\n" + os.str();
    }
    throw InputError("cannot import method '" + method_ + "': " + why + where);
  }

  // A get_attr node for a constant, created once per name, in the prologue.
  Value* constantValue(const std::string& name, const c10::IValue& iv) {
    auto it = constantValues_.find(name);
    if (it != constantValues_.end()) return it->second;
    if (!model_.constants->contains(name)) model_.constants->set(name, iv);
    c10::TypePtr type = iv.isTensor() ? c10::TensorType::get() : normalizeType(iv.type());
    Node* n = graph_->createGetAttr(name, type);
    if (prologueTail_) n->insertAfter(prologueTail_); else graph_->block()->prependNode(n);
    prologueTail_ = n;
    return constantValues_[name] = n->output();
  }

  // ---- Load-time values (ir/load_time.h): a model ptopt wrote with packed
  // weights reads them from its `ptopt_load_time` holder, whose __setstate__
  // computes each from the dense weights it stores. The import rebuilds that
  // computation in the graph (to_mkldnn, mkldnn_reorder_conv2d_weight on
  // constants), as the pass made it, so passes see dense weights and a new
  // export hoists the chain again.
  static bool isLoadTimeHolder(const c10::ivalue::Object& module) {
    const auto& name = module.type()->name();
    return name && name->qualifiedName().find("LoadTimeValues") != std::string::npos &&
           module.type()->findMethod("__setstate__");
  }

  Value* loadTimeValue(ts::Node* user, c10::ivalue::Object& holder, const std::string& holderPath,
                       const std::string& attr) {
    const std::string key = joinPath(holderPath, attr);
    if (auto it = loadTimeValues_.find(key); it != loadTimeValues_.end()) return it->second;
    auto& setstate = torch::jit::toGraphFunction(*holder.type()->findMethod("__setstate__"));
    const std::shared_ptr<ts::Graph> g = setstate.graph();
    ts::Value* self = g->inputs().at(0);
    ts::Value* produced = nullptr;
    for (ts::Node* n : g->nodes())
      if (n->kind() == c10::prim::SetAttr && n->input(0) == self && n->s(c10::attr::name) == attr) produced = n->input(1);
    if (!produced) unsupported(user, "'" + key + "' is a oneDNN tensor that its module's __setstate__ does not compute");
    return loadTimeValues_[key] = rebuildLoadTime(user, produced, self, holder, holderPath);
  }

  Value* rebuildLoadTime(ts::Node* user, ts::Value* v, ts::Value* self, c10::ivalue::Object& holder,
                         const std::string& holderPath) {
    ts::Node* p = v->node();
    if (p->kind() == c10::prim::GetAttr && p->input(0) == self) {
      const std::string name = p->s(c10::attr::name);
      const c10::IValue stored = holder.getAttr(name);
      if (!stored.isTensor() || stored.toTensor().layout() != c10::kStrided)
        unsupported(user, "the load-time value reads '" + name + "', which is not a dense tensor");
      // Not under the holder's own path: the export reads `ptopt_load_time.*`
      // as load-time values.
      return tensorConstant(stored.toTensor(), holderPath + "_" + name);
    }
    const std::string op = p->kind().toQualString();
    if (!isLoadTimeOperatorName(op))
      unsupported(user, "the load-time value is computed by " + op + ", which ptopt does not rebuild");
    std::vector<Arg> args;
    for (ts::Value* in : p->inputs()) {
      const bool none = in->node()->kind() == c10::prim::Constant && in->type()->kind() == c10::TypeKind::NoneType;
      if (!none && in->type()->isSubtypeOf(*c10::OptionalType::ofTensor())) {
        args.emplace_back(rebuildLoadTime(user, in, self, holder, holderPath));
        continue;
      }
      // A constant, or a list of int constants ([1, 1] compiles to a
      // prim::ListConstruct; toIValue does not see through it).
      std::optional<c10::IValue> iv;
      if (in->node()->kind() == c10::prim::Constant) {
        iv = ts::toIValue(in);
      } else if (in->node()->kind() == c10::prim::ListConstruct) {
        std::vector<int64_t> ints;
        for (ts::Value* e : in->node()->inputs())
          if (e->node()->kind() == c10::prim::Constant)
            if (auto x = ts::toIValue(e); x && x->isInt()) ints.push_back(x->toInt());
        if (ints.size() == in->node()->inputs().size()) iv = c10::IValue(ints);
      }
      auto lit = iv ? Literal::fromIValue(*iv, in->type()) : std::nullopt;
      if (!lit) unsupported(user, "an argument of the load-time " + op + " is not a constant");
      args.emplace_back(*lit);
    }
    Node* call = graph_->createCall(op, std::move(args), {p->output()->type()});  // a tensor, or a packed conv
    if (prologueTail_) call->insertAfter(prologueTail_); else graph_->block()->prependNode(call);
    prologueTail_ = call;
    return call->output();
  }

  // A tensor reachable under two names (a shared weight) stays one constant.
  // The constant shares storage with the module when it covers its storage
  // exactly (what the file holds, nothing more); copyWrittenConstants then
  // copies those the model may write. A view of part of a storage is copied
  // compactly, so that the output does not carry the rest.
  Value* tensorConstant(const at::Tensor& t, const std::string& preferredName) {
    auto [it, inserted] = tensors_.names.emplace(t.unsafeGetTensorImpl(), preferredName);
    if (inserted && preferredName.rfind("const.", 0) == 0)
      it->second = model_.constants->uniqueName(preferredName);
    if (!inserted) return constantValue(it->second, t);
    if (coversItsStorage(t)) {
      tensors_.shared.insert(it->second);
      return constantValue(it->second, t.detach());
    }
    return constantValue(it->second, t.detach().clone(at::MemoryFormat::Preserve));
  }

  Arg argFor(ts::Node* user, size_t i) {
    const Binding& b = binding(user->input(i), user);
    if (b.function) unsupported(user, "a function is used as a value");
    if (b.module)
      unsupported(user, "submodule '" + (b.modulePath.empty() ? "self" : b.modulePath) +
                            "' is used as a value by " + user->kind().toQualString() +
                            " (only attribute reads can be frozen)");
    if (b.value) return b.value;
    c10::TypePtr hint;
    if (const auto* schema = user->maybeSchema())
      if (i < schema->arguments().size()) hint = schema->arguments()[i].real_type();
    return *Literal::fromIValue(*b.constant, hint);
  }

  void convertBlock(ts::Block* tb, Block* b) {
    Builder builder(b);
    convertNodes(tb, builder);
    Node* out = b->outputNode();
    for (ts::Value* v : tb->outputs()) out->addArg(argOf(v, tb->return_node()));
  }

  void convertNodes(ts::Block* tb, Builder& builder) {
    for (ts::Node* n : tb->nodes()) convertNode(n, builder);
  }

  // A block output or loop-carried value: literals keep their natural type.
  Arg argOf(ts::Value* v, ts::Node* user) {
    const Binding& b = binding(v, user);
    if (b.module || b.function) unsupported(user, "a submodule or function is used as a value");
    if (b.value) return b.value;
    return *Literal::fromIValue(*b.constant);
  }

  const Binding& binding(ts::Value* v, ts::Node* user) {
    auto it = env_.find(v);
    if (it == env_.end()) unsupported(user, "internal: %" + v->debugName() + " was not converted");
    return it->second;
  }

  // Inlines a call: binds the callee's inputs to the call's arguments,
  // converts its body in place, and binds the call's outputs to its results.
  void inlineCall(ts::Node* call, ts::Graph& callee, size_t firstArg, const std::string& scope,
                  Builder& builder) {
    const auto params = callee.inputs();
    if (params.size() != call->inputs().size() - firstArg)
      unsupported(call, "internal: call arity does not match its callee");
    for (size_t i = 0; i < params.size(); ++i) env_[params[i]] = binding(call->input(firstArg + i), call);
    scopes_.push_back(scope);
    convertNodes(callee.block(), builder);
    scopes_.pop_back();
    for (size_t i = 0; i < call->outputs().size(); ++i)
      env_[call->output(i)] = binding(callee.outputs()[i], call);
  }

  // Evaluates a side-effect-free operator whose inputs are all literals and
  // whose results are immutable scalars (e.g. `not self.training`), so the
  // branches they decide fold away.
  bool tryFoldLiterals(ts::Node* n) {
    // Only aten:: and prim:: operators: opaque ones (torchvision::, custom
    // ops) are never evaluated, see ir/dead_code.h.
    if (!n->kind().is_aten() && !n->kind().is_prim()) return false;
    const c10::FunctionSchema* schema = n->maybeSchema();
    if (!schema || schema->is_mutable() || !n->blocks().empty() || n->outputs().empty()) return false;
    for (ts::Value* out : n->outputs()) {
      const auto kind = out->type()->kind();
      if (kind != c10::TypeKind::BoolType && kind != c10::TypeKind::IntType &&
          kind != c10::TypeKind::FloatType && kind != c10::TypeKind::StringType &&
          kind != c10::TypeKind::NoneType && kind != c10::TypeKind::DeviceObjType)
        return false;
    }
    torch::jit::Stack stack;
    for (ts::Value* in : n->inputs()) {
      auto it = env_.find(in);
      if (it == env_.end() || !it->second.constant) return false;
      stack.push_back(*it->second.constant);
    }
    try {
      n->getOperation()(stack);
    } catch (const std::exception&) {
      return false;  // leave it to run time (it may sit in a dead branch)
    }
    if (stack.size() != n->outputs().size()) return false;
    for (size_t i = 0; i < stack.size(); ++i) {
      if (!Literal::fromIValue(stack[i])) return false;
    }
    for (size_t i = 0; i < stack.size(); ++i) env_[n->output(i)].constant = stack[i];
    return true;
  }

  // A read or write of module state: `prim::GetAttr[name=path]()` or
  // `prim::SetAttr[name=path](value)`; the initial value is in the constant
  // table under the path (a deep copy: the original module keeps its own).
  Node* stateNode(ts::Node* n, const char* target, const std::string& path, const c10::IValue& initial,
                  Builder& builder) {
    if (!model_.constants->contains(path)) model_.constants->set(path, initial.deepcopy());
    Node* node = graph_->createNode(Opcode::CallFunction, target, "");
    node->setAttr("name", Literal(path));
    node->setScope(scopes_.back());
    node->setSourceLocation(sourceLocationOf(n));
    builder.insert(node);
    return node;
  }

  void convertNode(ts::Node* n, Builder& builder) {
    if (n->kind() == c10::prim::Constant) {
      ts::Value* out = n->output();
      if (auto fn = out->type()->cast<c10::FunctionType>()) {
        env_[out].function = fn->function();
        return;
      }
      auto iv = ts::toIValue(out);
      if (!iv) unsupported(n, "a constant of type " + out->type()->str() + " has no value");
      if (iv->isTensor()) {
        env_[out].value = tensorConstant(iv->toTensor(), "const." + out->debugName());
      } else if (Literal::fromIValue(*iv)) {
        env_[out].constant = *iv;
      } else {
        env_[out].value = constantValue(model_.constants->uniqueName("const." + out->debugName()), *iv);
      }
      return;
    }
    if (n->kind() == c10::prim::GetAttr) {
      const Binding& owner = binding(n->input(0), n);
      if (owner.module) {
        const std::string name = n->s(c10::attr::name);
        const std::string path = joinPath(owner.modulePath, name);
        c10::IValue attr = owner.module->getAttr(name);
        Binding b;
        if (statePaths_.count(path) && !isModuleValue(attr)) {
          env_[n->output()].value = stateNode(n, "prim::GetAttr", path, attr, builder)->addOutput(
              normalizeType(n->output()->type()), n->output()->debugName());
          return;
        }
        if (isModuleValue(attr)) {
          b.module = attr.toObject().get();
          // ptopt's own ConstantBuckets (export.cpp) are not part of the
          // names: `ptopt_constants_3.layer1.0.weight` is `layer1.0.weight`.
          b.modulePath = isConstantBucket(name, *b.module) ? owner.modulePath : path;
        } else if (((attr.isTensor() && attr.toTensor().layout() != c10::kStrided) || attr.isCapsule() ||
                    (attr.isObject() && attr.toObject()->type()->name() &&
                     attr.toObject()->type()->name()->qualifiedName().rfind("__torch__.torch.classes.", 0) == 0)) &&
                   isLoadTimeHolder(*owner.module)) {
          b.value = loadTimeValue(n, *owner.module, owner.modulePath, name);
        } else if (attr.isTensor()) {
          b.value = tensorConstant(attr.toTensor(), path);
        } else if (Literal::fromIValue(attr)) {
          b.constant = attr;
        } else {
          b.value = constantValue(path, attr);
        }
        env_[n->output()] = b;
        return;
      }
    }
    if (n->kind() == c10::prim::SetAttr && binding(n->input(0), n).module) {
      const Binding& owner = binding(n->input(0), n);
      const std::string name = n->s(c10::attr::name);
      const std::string path = joinPath(owner.modulePath, name);
      c10::IValue attr = owner.module->getAttr(name);
      if (isModuleValue(attr))
        unsupported(n, "it assigns submodule '" + path + "' (prim::SetAttr): ptopt cannot keep that");
      // A mutable attribute: every read of it, before or after this point,
      // must stay a read at run time. Start over knowing that.
      if (statePaths_.insert(path).second) throw RestartWithState{};
      stateNode(n, "prim::SetAttr", path, attr, builder)->addArg(argFor(n, 1));
      return;
    }
    if (n->kind() == c10::prim::CallMethod) {
      const Binding& self = binding(n->input(0), n);
      if (!self.module) unsupported(n, "prim::CallMethod on a value that is not a submodule");
      auto& method = self.module->type()->getMethod(n->s(c10::attr::name));
      inlineCall(n, *torch::jit::toGraphFunction(method).optimized_graph(), 0, self.modulePath, builder);
      return;
    }
    if (n->kind() == c10::prim::CallFunction) {
      const Binding& fn = binding(n->input(0), n);
      if (!fn.function) unsupported(n, "prim::CallFunction of a function that cannot be inlined");
      inlineCall(n, *torch::jit::toGraphFunction(*fn.function).optimized_graph(), 1, scopes_.back(), builder);
      return;
    }
    if (n->kind() == c10::prim::If) {
      const Binding& cond = binding(n->input(0), n);
      if (cond.constant && cond.constant->isBool()) {
        ts::Block* taken = n->blocks()[cond.constant->toBool() ? 0 : 1];
        convertNodes(taken, builder);
        for (size_t i = 0; i < n->outputs().size(); ++i)
          env_[n->output(i)] = binding(taken->outputs()[i], n);
        return;
      }
    }
    if (tryFoldLiterals(n)) return;

    const c10::FunctionSchema* schema = n->maybeSchema();
    Node* node = graph_->createNode(Opcode::CallFunction, n->kind().toQualString(),
                                    schema ? schema->overload_name() : "");
    node->setSchema(schema);
    for (size_t i = 0; i < n->inputs().size(); ++i) node->addArg(argFor(n, i));
    copyAttributes(n, node);
    node->setScope(joinPath(scopes_.back(), scopeFromCallStack(n)));
    node->setSourceLocation(sourceLocationOf(n));
    for (ts::Value* out : n->outputs())
      env_[out].value = node->addOutput(normalizeType(out->type()), out->debugName());
    builder.insert(node);
    for (ts::Block* tb : n->blocks()) {
      Block* nested = node->addBlock();
      for (ts::Value* p : tb->inputs())
        env_[p].value = nested->addParam(normalizeType(p->type()), p->debugName());
      convertBlock(tb, nested);
    }
    if (node->scope().empty() && !node->blocks().empty()) node->setScope(commonScopeInside(*node));
  }

  // The scope shared by every node in `n`'s blocks (TorchScript gives an
  // inlined prim::If no call stack of its own; its body nodes have one).
  static std::string commonScopeInside(const Node& n) {
    std::optional<std::vector<std::string>> common;  // segments
    for (const auto& b : n.blocks())
      for (const Node* inner : *b) {
        if (!inner->isCall()) continue;
        if (inner->scope().empty()) return "";
        std::vector<std::string> segs(1);
        for (char c : inner->scope()) {
          if (c == '.') segs.emplace_back();
          else segs.back().push_back(c);
        }
        if (!common) { common = segs; continue; }
        size_t k = 0;
        while (k < common->size() && k < segs.size() && (*common)[k] == segs[k]) ++k;
        common->resize(k);
      }
    std::string out;
    if (common)
      for (const auto& seg : *common) out = joinPath(out, seg);
    return out;
  }

  void copyAttributes(ts::Node* n, Node* node) {
    for (c10::Symbol name : n->attributeNames()) {
      const std::string key = name.toUnqualString();
      switch (n->kindOf(name)) {
        case ts::AttributeKind::i: node->setAttr(key, Literal(n->i(name))); break;
        case ts::AttributeKind::f: node->setAttr(key, Literal(n->f(name))); break;
        case ts::AttributeKind::s: node->setAttr(key, Literal(n->s(name))); break;
        case ts::AttributeKind::is: node->setAttr(key, Literal(n->is(name))); break;
        case ts::AttributeKind::fs: node->setAttr(key, Literal(n->fs(name))); break;
        case ts::AttributeKind::ss: node->setAttr(key, Literal(n->ss(name))); break;
        case ts::AttributeKind::ty: node->setAttr(key, TypesAttr{{n->ty(name)}, false}); break;
        case ts::AttributeKind::tys: node->setAttr(key, TypesAttr{n->tys(name), true}); break;
        default:
          unsupported(n, std::string(n->kind().toQualString()) + " has attribute '" + key +
                             "' of a kind ptopt does not import");
      }
    }
  }

  Model& model_;
  const torch::jit::Module& root_;
  ModuleTensors& tensors_;
  std::set<std::string>& statePaths_;
  std::string method_;
  std::unique_ptr<Graph> graph_;
  std::unordered_map<ts::Value*, Binding> env_;
  std::unordered_map<std::string, Value*> constantValues_;
  std::unordered_map<std::string, Value*> loadTimeValues_;  // holder path.attr -> the rebuilt chain
  Node* prologueTail_ = nullptr;
  std::vector<std::string> scopes_{""};
};

Model importMethods(const torch::jit::Module& module, const std::vector<std::string>& methods,
                    std::set<std::string>& statePaths) {
  Model model;
  ModuleTensors tensors;
  for (const auto& name : methods) {
    auto method = module.find_method(name);
    if (!method)
      throw InputError("the model has no method '" + name + "'" +
                       (name == "forward" ? "" : " (check --preserve-methods)"));
    // The method's own graph, not a copy: conversion only reads it, and
    // inlines calls as it goes (linear in the size of the inlined result).
    Converter converter(model, module, tensors, statePaths);
    std::unique_ptr<Graph> graph;
    try {
      graph = converter.convert(*method->graph(), name);
    } catch (const InputError&) {
      throw;
    } catch (const RestartWithState&) {
      throw;
    } catch (const std::exception& e) {
      throw InputError("cannot import method '" + name + "': " + torchErrorMessage(e));
    }
    eliminateDeadCode(*graph);
    model.methods.emplace_back(name, std::move(graph));
  }
  copyWrittenConstants(model, tensors.shared);
  return model;
}

}  // namespace

Model importModule(const torch::jit::Module& original, const ImportOptions& options) {
  torch::jit::Module module = original;  // shares state; eval() only flips `training`
  module.eval();
  std::vector<std::string> methods = {"forward"};
  for (const auto& m : options.preserveMethods)
    if (m != "forward") methods.push_back(m);
  // Attributes that some method assigns (prim::SetAttr) stay module state;
  // each one found restarts the import (rare: a few per model at most).
  std::set<std::string> statePaths;
  while (true) {
    try {
      Model model = importMethods(module, methods, statePaths);
      if (module.hasattr(kLoadTimeModule))
        for (auto& [name, graph] : model.methods)
          for (const RaiseStep& step : options.raiseSteps) step.raise(*graph);
      return model;
    } catch (const RestartWithState&) {
    }
  }
}

}  // namespace ptopt::ir
