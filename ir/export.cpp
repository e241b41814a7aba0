// ptopt IR -> TorchScript module (see model.h for the contract).
#include "ir/model.h"

#include <torch/csrc/jit/ir/ir.h>

#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <unistd.h>
#include <unordered_map>

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

bool isNumber(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// Holds the constants as attributes of a tree of submodules named after
// their path, and the (module path, leaf) each constant landed at.
class AttributeTree {
 public:
  AttributeTree(std::shared_ptr<torch::jit::CompilationUnit> cu, torch::jit::Module root)
      : cu_(std::move(cu)), root_(std::move(root)) {}

  // Registers the constant and returns the attribute path it lives at.
  std::vector<std::string> add(const std::string& name, const c10::IValue& value) {
    std::vector<std::string> path = splitPath(name);
    torch::jit::Module owner = root_;
    bool ok = true;
    for (size_t i = 0; i + 1 < path.size() && ok; ++i) {
      if (owner.hasattr(path[i])) {
        c10::IValue existing = owner.attr(path[i]);
        if (existing.isObject() && existing.toObjectRef().type()->is_module())
          owner = torch::jit::Module(existing.toObject());
        else
          ok = false;
      } else {
        torch::jit::Module sub(c10::QualifiedName("__torch__.ptopt.Submodule"), cu_, /*shouldMangle=*/true);
        sub.register_attribute("training", c10::BoolType::get(), false);
        owner.register_module(path[i], sub);
        owner = sub;
      }
    }
    if (!ok || owner.hasattr(path.back()) || path.back() == "training") {
      // A clash with an existing attribute: fall back to a flat unique name.
      std::string flat = "_" + sanitizeSegment(name);
      while (root_.hasattr(flat)) flat += "_";
      path = {flat};
      owner = root_;
    }
    if (value.isTensor())
      owner.register_buffer(path.back(), value.toTensor());
    else
      owner.register_attribute(path.back(), value.type(), value);
    return path;
  }

 private:
  std::shared_ptr<torch::jit::CompilationUnit> cu_;
  torch::jit::Module root_;
};

class GraphEmitter {
 public:
  GraphEmitter(const Graph& graph, const c10::ClassTypePtr& cls, AttributeTree& attrs,
               std::unordered_map<std::string, std::vector<std::string>>& attrPaths)
      : ir_(graph), cls_(cls), attrs_(attrs), attrPaths_(attrPaths) {}

  std::shared_ptr<ts::Graph> emit() {
    out_ = std::make_shared<ts::Graph>();
    self_ = out_->addInput("self");
    self_->setType(cls_);
    for (Value* in : ir_.inputs()) {
      ts::Value* v = out_->addInput();
      v->setType(in->type());
      setName(v, in->name());
      env_[in] = v;
    }
    // Pooled constants and attribute reads go before this anchor, at the top.
    noneValue_ = out_->insertConstant(c10::IValue());
    anchor_ = noneValue_->node();
    emitBlock(*ir_.block(), out_->block());
    if (!noneValue_->hasUses()) anchor_->destroy();
    out_->lint();
    return out_;
  }

 private:
  static void setName(ts::Value* v, const std::string& name) {
    if (!name.empty() && !isNumber(name)) v->setDebugName(name);
  }

  ts::Value* literal(const Literal& l) {
    if (l.isNone()) return noneValue_;
    const std::string key = l.type()->str() + "|" + l.str();
    auto it = pool_.find(key);
    if (it != pool_.end()) return it->second;
    ts::WithInsertPoint guard(anchor_);
    return pool_[key] = out_->insertConstant(l.toIValue());
  }

  ts::Value* attribute(const std::string& name) {
    auto it = attrValues_.find(name);
    if (it != attrValues_.end()) return it->second;
    auto pathIt = attrPaths_.find(name);
    if (pathIt == attrPaths_.end())
      pathIt = attrPaths_.emplace(name, attrs_.add(name, ir_.constants().at(name))).first;
    ts::WithInsertPoint guard(anchor_);
    ts::Value* cur = self_;
    std::string prefix;
    for (const auto& seg : pathIt->second) {
      prefix += (prefix.empty() ? "" : ".") + seg;
      auto cached = prefixValues_.find(prefix);
      if (cached != prefixValues_.end()) { cur = cached->second; continue; }
      cur = out_->insertGetAttr(cur, seg);
      prefixValues_[prefix] = cur;
    }
    return attrValues_[name] = cur;
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
    std::vector<ts::Value*> inputs;
    for (const Arg& a : n.args()) inputs.push_back(valueOf(a));
    ts::Node* node = out_->create(c10::Symbol::fromQualString(n.target()), inputs, n.numOutputs());
    for (size_t i = 0; i < n.numOutputs(); ++i) {
      node->output(i)->setType(n.output(i)->type());
      setName(node->output(i), n.output(i)->name());
      env_[n.output(i)] = node->output(i);
    }
    for (const auto& [key, value] : n.attrs()) setAttribute(node, key, value);
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
  AttributeTree& attrs_;
  std::unordered_map<std::string, std::vector<std::string>>& attrPaths_;
  std::shared_ptr<ts::Graph> out_;
  ts::Value* self_ = nullptr;
  ts::Value* noneValue_ = nullptr;
  ts::Node* anchor_ = nullptr;
  std::unordered_map<const Value*, ts::Value*> env_;
  std::unordered_map<std::string, ts::Value*> pool_;
  std::unordered_map<std::string, ts::Value*> attrValues_;
  std::unordered_map<std::string, ts::Value*> prefixValues_;
};

}  // namespace

torch::jit::Module exportModel(const Model& model, const ExportOptions& options) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module root(c10::QualifiedName("__torch__." + options.className), cu,
                          /*shouldMangle=*/true);
  root.register_attribute("training", c10::BoolType::get(), false);
  AttributeTree attrs(cu, root);
  std::unordered_map<std::string, std::vector<std::string>> attrPaths;
  for (const auto& [name, graph] : model.methods) {
    GraphEmitter emitter(*graph, root.type(), attrs, attrPaths);
    auto tsGraph = emitter.emit();
    auto* fn = cu->create_function(c10::QualifiedName(*root.type()->name(), name), tsGraph);
    root.type()->addMethod(fn);
  }
  return root;
}

void saveModuleAtomically(const torch::jit::Module& module, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::random_device rd;
  const fs::path tmp = dir / ("." + target.filename().string() + ".ptopt-tmp-" + std::to_string(rd()));
  try {
    module.save(tmp.string());
    // Flush the file to disk before it replaces anything.
    int fd = ::open(tmp.c_str(), O_RDONLY);
    if (fd < 0 || ::fsync(fd) != 0) {
      if (fd >= 0) ::close(fd);
      throw std::runtime_error("cannot flush '" + tmp.string() + "' to disk: " + std::strerror(errno));
    }
    ::close(fd);
    torch::jit::load(tmp.string());  // it must load back
    if (fs::exists(target)) fs::permissions(tmp, fs::status(target).permissions());
    fs::rename(tmp, target);
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write '" + path + "': " + torchErrorMessage(e));
  }
}

}  // namespace ptopt::ir
