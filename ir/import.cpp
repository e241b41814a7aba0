// TorchScript -> ptopt IR (see model.h for the contract).
#include "ir/model.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/ir/scope.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <fstream>
#include <sys/stat.h>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::ir {

namespace ts = torch::jit;

std::string torchErrorMessage(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

// ---------------------------------------------------------------- loading

torch::jit::Module loadTorchScript(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError("cannot read '" + path + "': " + std::strerror(errno) +
                     " (check the path)");
  if (S_ISDIR(st.st_mode))
    throw InputError("'" + path + "' is a directory, not a TorchScript file");
  char magic[4] = {};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("cannot open '" + path + "' for reading (check its permissions)");
    in.read(magic, 4);
  }
  if (!(magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4)) {
    if (static_cast<unsigned char>(magic[0]) == 0x80)
      throw InputError("'" + path + "' is a legacy torch.save() pickle, not TorchScript: "
                       "save the model with torch.jit.script(model).save(path)");
    throw InputError("'" + path + "' is not a TorchScript file (not a zip archive): "
                     "save the model with torch.jit.script(model).save(path) or "
                     "torch.jit.trace(model, example).save(path)");
  }
  bool hasCode = false;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const auto& record : reader.getAllRecords())
      if (record.find("code/") != std::string::npos || record.find("constants.pkl") != std::string::npos)
        hasCode = true;
  } catch (const std::exception& e) {
    throw InputError("'" + path + "' is a damaged zip archive: " + torchErrorMessage(e));
  }
  if (!hasCode)
    throw InputError("'" + path + "' is a torch.save() checkpoint (a state dict or pickled "
                     "object), not TorchScript: load it into its nn.Module in Python and save "
                     "with torch.jit.script(model).save(path)");
  try {
    return torch::jit::load(path);
  } catch (const std::exception& e) {
    std::string msg = torchErrorMessage(e);
    std::string hint;
    auto pos = msg.find("Unknown builtin op: ");
    if (pos != std::string::npos) {
      std::string op = msg.substr(pos + 20);
      op = op.substr(0, op.find_first_of(".\n "));
      hint = "\nthe model calls operator '" + op +
             "' that no loaded library registers: load the library that defines it first";
      if (op.rfind("torchvision::", 0) == 0)
        hint += " (torchvision's C++ ops library, libtorchvision.so, provides torchvision:: ops)";
    }
    throw InputError("cannot load TorchScript '" + path + "': " + msg + hint);
  }
}

// ---------------------------------------------------------------- freezing

namespace {

bool isModuleValue(const c10::IValue& v) {
  return v.isObject() && v.toObjectRef().type()->is_module();
}

std::string joinPath(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Walks every node of `b` (nested blocks included) in program order.
void forEachNode(ts::Block* b, const std::function<void(ts::Node*)>& f) {
  for (ts::Node* n : b->nodes()) {
    f(n);
    for (ts::Block* nested : n->blocks()) forEachNode(nested, f);
  }
}

// Replaces reads of non-tensor, non-module attributes (ints, bools such as
// `training`, lists, strings) by constants, so constant propagation can fold
// the branches they control. Refuses attribute writes.
void inlineScalarAttributes(ts::Graph& graph, const torch::jit::Module& root,
                            const std::string& method) {
  std::unordered_map<ts::Value*, std::pair<c10::ivalue::Object*, std::string>> modules;
  modules[graph.inputs()[0]] = {root._ivalue().get(), ""};
  std::vector<ts::Node*> dead;
  forEachNode(graph.block(), [&](ts::Node* n) {
    if (n->kind() != c10::prim::GetAttr && n->kind() != c10::prim::SetAttr) return;
    auto it = modules.find(n->input(0));
    if (it == modules.end()) return;
    const std::string name = n->s(c10::attr::name);
    const std::string path = joinPath(it->second.second, name);
    if (n->kind() == c10::prim::SetAttr)
      throw InputError("method '" + method + "' assigns attribute '" + path +
                       "' (prim::SetAttr): ptopt freezes modules and cannot keep mutable "
                       "module state; remove the assignment or keep it out of " + method);
    c10::IValue attr = it->second.first->getAttr(name);
    if (isModuleValue(attr)) {
      modules[n->output()] = {attr.toObject().get(), path};
    } else if (!attr.isTensor() && Literal::fromIValue(attr)) {
      ts::WithInsertPoint guard(graph.block()->nodes().front());
      n->output()->replaceAllUsesWith(graph.insertConstant(attr));
      dead.push_back(n);
    }
  });
  for (ts::Node* n : dead) n->destroy();
}

// Module scope of a node from its inlined call stack (`layer1.0.conv1`).
std::string scopeOf(ts::Node* n) {
  std::string scope;
  if (auto cs = n->callstack()) {
    c10::optional<ts::InlinedCallStackPtr> cur = *cs;
    while (cur) {
      if (auto info = (*cur)->module_instance()) {
        // The top-level instance name is the root's own; skip it.
        if ((*cur) != *cs && !info->instance_name().empty())
          scope = joinPath(scope, info->instance_name());
      }
      cur = (*cur)->callee();
    }
  }
  if (scope.empty() && n->scope() && !n->scope()->isRoot()) scope = n->scope()->namesFromRoot();
  return scope;
}

// What a TorchScript value maps to during conversion.
struct Binding {
  Value* value = nullptr;                   // an IR value, or
  std::optional<c10::IValue> constant;      // a literal constant, or
  c10::ivalue::Object* module = nullptr;    // a (sub)module
  std::string modulePath;
};

class Converter {
 public:
  Converter(Model& model, const torch::jit::Module& root,
            std::unordered_map<c10::TensorImpl*, std::string>& tensorNames)
      : model_(model), root_(root), tensorNames_(tensorNames) {}

  std::unique_ptr<Graph> convert(ts::Graph& tsGraph, const std::string& method) {
    method_ = method;
    graph_ = std::make_unique<Graph>(model_.constants);
    auto inputs = tsGraph.inputs();
    env_[inputs[0]] = Binding{nullptr, std::nullopt, root_._ivalue().get(), ""};
    for (size_t i = 1; i < inputs.size(); ++i) {
      Value* v = graph_->addInput(normalizeType(inputs[i]->type()), inputs[i]->debugName());
      env_[inputs[i]].value = v;
      prologueTail_ = v->node();
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
    model_.constants->set(name, iv);
    c10::TypePtr type = iv.isTensor() ? c10::TensorType::get() : normalizeType(iv.type());
    Node* n = graph_->createGetAttr(name, type);
    if (prologueTail_) n->insertAfter(prologueTail_); else graph_->block()->prependNode(n);
    prologueTail_ = n;
    return constantValues_[name] = n->output();
  }

  Value* tensorConstant(const at::Tensor& t, const std::string& preferredName) {
    auto [it, inserted] = tensorNames_.emplace(t.unsafeGetTensorImpl(), preferredName);
    if (inserted && preferredName.rfind("const.", 0) == 0)
      it->second = model_.constants->uniqueName(preferredName);
    return constantValue(it->second, t);
  }

  Arg argFor(ts::Node* user, size_t i) {
    ts::Value* in = user->input(i);
    auto it = env_.find(in);
    if (it == env_.end()) unsupported(user, "internal: input %" + in->debugName() + " not converted");
    const Binding& b = it->second;
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
    for (ts::Node* n : tb->nodes()) convertNode(n, builder);
    Node* out = b->outputNode();
    for (size_t i = 0; i < tb->outputs().size(); ++i) {
      ts::Value* v = tb->outputs()[i];
      auto it = env_.find(v);
      if (it != env_.end() && it->second.module)
        unsupported(tb->owningNode() ? tb->owningNode() : tb->return_node(),
                    "a submodule is returned as a value");
      out->addArg(it->second.value ? Arg(it->second.value)
                                   : Arg(*Literal::fromIValue(*it->second.constant)));
    }
  }

  void convertNode(ts::Node* n, Builder& builder) {
    if (n->kind() == c10::prim::Constant) {
      ts::Value* out = n->output();
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
      auto it = env_.find(n->input(0));
      if (it != env_.end() && it->second.module) {
        const std::string name = n->s(c10::attr::name);
        const std::string path = joinPath(it->second.modulePath, name);
        c10::IValue attr = it->second.module->getAttr(name);
        Binding& b = env_[n->output()];
        if (isModuleValue(attr)) {
          b.module = attr.toObject().get();
          b.modulePath = path;
        } else if (attr.isTensor()) {
          b.value = tensorConstant(attr.toTensor(), path);
        } else if (Literal::fromIValue(attr)) {
          b.constant = attr;
        } else {
          b.value = constantValue(path, attr);
        }
        return;
      }
    }
    if (n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction)
      unsupported(n, std::string(n->kind().toQualString()) +
                         " could not be inlined (an interface or a Python function call)");

    const c10::FunctionSchema* schema = n->maybeSchema();
    Node* node = graph_->createNode(Opcode::CallFunction, n->kind().toQualString(),
                                    schema ? schema->overload_name() : "");
    node->setSchema(schema);
    for (size_t i = 0; i < n->inputs().size(); ++i) node->addArg(argFor(n, i));
    copyAttributes(n, node);
    node->setScope(scopeOf(n));
    for (ts::Value* out : n->outputs())
      env_[out].value = node->addOutput(normalizeType(out->type()), out->debugName());
    builder.insert(node);
    for (ts::Block* tb : n->blocks()) {
      Block* nested = node->addBlock();
      for (ts::Value* p : tb->inputs())
        env_[p].value = nested->addParam(normalizeType(p->type()), p->debugName());
      convertBlock(tb, nested);
    }
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
  std::unordered_map<c10::TensorImpl*, std::string>& tensorNames_;
  std::string method_;
  std::unique_ptr<Graph> graph_;
  std::unordered_map<ts::Value*, Binding> env_;
  std::unordered_map<std::string, Value*> constantValues_;
  Node* prologueTail_ = nullptr;
};

}  // namespace

Model importModule(const torch::jit::Module& original, const ImportOptions& options) {
  torch::jit::Module module = original;  // shares state; eval() only flips `training`
  module.eval();
  Model model;
  std::unordered_map<c10::TensorImpl*, std::string> tensorNames;
  std::vector<std::string> methods = {"forward"};
  for (const auto& m : options.preserveMethods)
    if (m != "forward") methods.push_back(m);
  for (const auto& name : methods) {
    auto method = module.find_method(name);
    if (!method)
      throw InputError("the model has no method '" + name + "'" +
                       (name == "forward" ? "" : " (check --preserve-methods)"));
    std::shared_ptr<ts::Graph> graph = method->graph()->copy();
    try {
      ts::Inline(*graph);
      inlineScalarAttributes(*graph, module, name);
      ts::ConstantPropagationImmutableTypes(graph);
      ts::EliminateDeadCode(graph);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw InputError("cannot freeze method '" + name + "': " + torchErrorMessage(e));
    }
    Converter converter(model, module, tensorNames);
    model.methods.emplace_back(name, converter.convert(*graph, name));
  }
  return model;
}

}  // namespace ptopt::ir
