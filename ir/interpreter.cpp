// The Interpreter (see interpreter.h for the contract).
#include "ir/interpreter.h"

#include "ir/model.h"
#include "ir/qdq_ops.h"
#include "ir/text.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <functional>
#include <map>
#include <unordered_set>

namespace ptopt::ir {

namespace ts = torch::jit;

namespace {

using Stack = std::vector<c10::IValue>;

// `%y : Tensor = aten::relu(%x)` (in layer1.0), for error messages.
std::string describe(const Node& n) {
  std::string s = "`" + printNode(n) + "`";
  if (!n.scope().empty()) s += " (in " + n.scope() + ")";
  return s;
}

[[noreturn]] void fail(const Node& n, const std::string& why) {
  throw InterpreterError("cannot run " + describe(n) + ": " + why);
}

// ------------------------------------------------------------ hand-written prims

using PrimFn = std::vector<c10::IValue> (*)(const Node&, Stack&);

std::vector<c10::IValue> listConstruct(const Node& n, Stack& args) {
  c10::TypePtr elem;
  if (auto lt = n.output()->type() ? n.output()->type()->cast<c10::ListType>() : nullptr)
    elem = lt->getElementType();
  else
    elem = args.empty() ? c10::AnyType::get() : args.front().type();
  c10::impl::GenericList list(elem);
  list.reserve(args.size());
  for (auto& a : args) list.push_back(std::move(a));
  return {c10::IValue(std::move(list))};
}

std::vector<c10::IValue> listUnpack(const Node& n, Stack& args) {
  if (args.size() != 1 || !args[0].isList()) fail(n, "prim::ListUnpack expects one list");
  auto list = args[0].toList();
  if (list.size() != n.numOutputs())
    fail(n, "expected " + std::to_string(n.numOutputs()) + " elements in a list but found " +
                std::to_string(list.size()));
  return std::vector<c10::IValue>(list.begin(), list.end());
}

std::vector<c10::IValue> tupleConstruct(const Node& n, Stack& args) {
  if (n.numOutputs() == 1 && n.output()->type()) {
    if (auto tt = n.output()->type()->cast<c10::TupleType>(); tt && tt->name())
      return {c10::IValue(c10::ivalue::Tuple::createNamed(std::move(args), tt))};
  }
  return {c10::IValue(c10::ivalue::Tuple::create(std::move(args)))};
}

std::vector<c10::IValue> tupleUnpack(const Node& n, Stack& args) {
  if (args.size() != 1 || !args[0].isTuple()) fail(n, "prim::TupleUnpack expects one tuple");
  const auto& elems = args[0].toTupleRef().elements();
  if (elems.size() != n.numOutputs())
    fail(n, "expected a tuple of " + std::to_string(n.numOutputs()) + " elements but found " +
                std::to_string(elems.size()));
  return std::vector<c10::IValue>(elems.begin(), elems.end());
}

std::vector<c10::IValue> tupleIndex(const Node& n, Stack& args) {
  if (args.size() != 2 || !args[0].isTuple() || !args[1].isInt())
    fail(n, "prim::TupleIndex expects a tuple and an int");
  const auto& elems = args[0].toTupleRef().elements();
  int64_t i = args[1].toInt();
  const auto size = static_cast<int64_t>(elems.size());
  if (i < 0) i += size;
  if (i < 0 || i >= size) fail(n, "tuple index " + std::to_string(args[1].toInt()) + " out of range");
  return {elems[static_cast<size_t>(i)]};
}

std::vector<c10::IValue> dictConstruct(const Node& n, Stack& args) {
  if (args.size() % 2) fail(n, "prim::DictConstruct expects key/value pairs");
  auto dt = n.output()->type() ? n.output()->type()->cast<c10::DictType>() : nullptr;
  if (!dt) fail(n, "prim::DictConstruct's result is not typed as a Dict");
  c10::impl::GenericDict dict(dt->getKeyType(), dt->getValueType());
  dict.reserve(args.size() / 2);
  for (size_t i = 0; i < args.size(); i += 2) dict.insert_or_assign(args[i], args[i + 1]);
  return {c10::IValue(std::move(dict))};
}

std::vector<c10::IValue> uncheckedCast(const Node& n, Stack& args) {
  if (args.size() != 1) fail(n, "prim::unchecked_cast expects one argument");
  return {std::move(args[0])};
}

std::vector<c10::IValue> uninitialized(const Node&, Stack&) { return {c10::IValue::uninitialized()}; }

std::vector<c10::IValue> raiseException(const Node& n, Stack& args) {
  std::string msg = !args.empty() && args[0].isString() ? args[0].toStringRef() : "(no message)";
  std::string cls;
  if (args.size() > 1 && args[1].isString()) cls = args[1].toStringRef();
  throw InterpreterError("the model raised " + (cls.empty() ? std::string("an exception") : cls) +
                         ": " + msg + " (at " + describe(n) + ")");
}

std::vector<c10::IValue> isInstance(const Node& n, Stack& args) {
  if (args.size() != 1) fail(n, "prim::isinstance expects one argument");
  const auto* types = n.attr("types");
  const auto* list = types ? std::get_if<TypesAttr>(types) : nullptr;
  if (!list) fail(n, "prim::isinstance has no `types` attribute");
  const c10::TypePtr actual = args[0].type();
  for (const auto& candidate : list->types)
    if (actual->isSubtypeOf(*candidate)) return {c10::IValue(true)};
  return {c10::IValue(false)};
}

std::vector<c10::IValue> objectGetAttr(const Node& n, Stack& args) {
  const auto* name = n.attr("name");
  const auto* lit = name ? std::get_if<Literal>(name) : nullptr;
  if (!lit || !lit->is<std::string>()) fail(n, "prim::GetAttr has no `name` attribute");
  // (Module state, without arguments, is handled by Impl::runModuleState.)
  if (args.size() != 1 || !args[0].isObject()) fail(n, "prim::GetAttr expects an object");
  return {args[0].toObjectRef().getAttr(lit->as<std::string>())};
}

// A write to an object's attribute (module state: Impl::runModuleState).
std::vector<c10::IValue> setAttr(const Node& n, Stack& args) {
  if (args.size() != 2) fail(n, "prim::SetAttr expects an object and a value");
  const auto* name = n.attr("name");
  const auto* lit = name ? std::get_if<Literal>(name) : nullptr;
  if (!lit || !lit->is<std::string>()) fail(n, "prim::SetAttr has no `name` attribute");
  if (!args[0].isObject()) fail(n, "prim::SetAttr expects an object");
  args[0].toObjectRef().setAttr(lit->as<std::string>(), std::move(args[1]));
  return {};
}

// warnings.warn(...): TorchScript's interpreter implements it itself; the
// model already warned when it was loaded or run for real, so nothing here.
std::vector<c10::IValue> warn(const Node&, Stack&) { return {}; }

// A TorchScript class instance (torchvision's ImageList), attributes unset.
std::vector<c10::IValue> createObject(const Node& n, Stack&) {
  auto cls = n.numOutputs() == 1 && n.output()->type() ? n.output()->type()->cast<c10::ClassType>() : nullptr;
  if (!cls) fail(n, "prim::CreateObject needs a class type");
  auto cu = cls->compilation_unit();
  if (!cu) fail(n, "the compilation unit of class " + cls->repr_str() + " is gone");
  return {c10::ivalue::Object::create(c10::StrongTypePtr(cu, cls), cls->numAttributes())};
}

const std::map<std::string, PrimFn>& handWrittenPrims() {
  static const std::map<std::string, PrimFn> prims = {
      {"prim::ListConstruct", listConstruct},   {"prim::ListUnpack", listUnpack},
      {"prim::TupleConstruct", tupleConstruct}, {"prim::TupleUnpack", tupleUnpack},
      {"prim::TupleIndex", tupleIndex},         {"prim::DictConstruct", dictConstruct},
      {"prim::unchecked_cast", uncheckedCast},  {"prim::Uninitialized", uninitialized},
      {"prim::RaiseException", raiseException}, {"prim::isinstance", isInstance},
      {"prim::GetAttr", objectGetAttr},         {"prim::SetAttr", setAttr},
      {"prim::CreateObject", createObject},     {"aten::warn", warn},
  };
  return prims;
}

// ------------------------------------------------------------ operators

// How one node runs: a hand-written prim, or a boxed operator.
struct ResolvedOp {
  PrimFn prim = nullptr;
  ts::Operation op = nullptr;
  QdqKernel qdq = nullptr;  // a Q/DQ op of PT2E's int8 form that no library registered (ir/qdq_ops.h)
  const c10::FunctionSchema* schema = nullptr;  // for argument defaults
  bool pushInputCount = false;                  // vararg ops read it from the stack
  std::shared_ptr<ts::Graph> keepAlive;         // the node an OperationCreator saw
};

void setTorchScriptAttribute(const Node& n, ts::Node* node, const std::string& key, const AttrValue& value) {
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
  else fail(n, "attribute '" + key + "' = " + lit.str() + " has no TorchScript form");
}

// Operators that TorchScript creates per node (OperationCreator) need a
// TorchScript node: build an equivalent one in a graph of its own.
std::optional<ResolvedOp> resolveThroughTorchScriptNode(const Node& n) {
  auto g = std::make_shared<ts::Graph>();
  ts::Node* node = g->create(c10::Symbol::fromQualString(n.target()), 0);
  for (const Arg& a : n.args()) {
    ts::Value* in = g->addInput();
    c10::TypePtr t = a.isValue() ? a.value()->type() : a.literal().type();
    in->setType(t ? t : c10::AnyType::get());
    node->addInput(in);
  }
  for (const auto& out : n.outputs())
    node->addOutput()->setType(out->type() ? out->type() : c10::AnyType::get());
  for (const auto& [key, value] : n.attrs()) setTorchScriptAttribute(n, node, key, value);
  g->insertNode(node);
  const ts::Operator* op = node->maybeOperator();
  if (!op) return std::nullopt;
  ResolvedOp r;
  r.op = op->getOperation(node);
  r.pushInputCount = op->hasOperation() && op->schema().is_vararg();
  r.keepAlive = std::move(g);
  return r;
}

ResolvedOp resolve(const Node& n) {
  if (n.opcode() != Opcode::CallFunction) fail(n, "not a call_function node");
  auto prim = handWrittenPrims().find(n.target());
  if (prim != handWrittenPrims().end()) {
    ResolvedOp r;
    r.prim = prim->second;
    return r;
  }
  if (n.target().find("::") == std::string::npos) fail(n, "'" + n.target() + "' is not a qualified operator name");
  const auto& ops = ts::getAllOperatorsFor(c10::Symbol::fromQualString(n.target()));
  std::shared_ptr<ts::Operator> match;
  for (const auto& op : ops)
    if (n.schema() && &op->schema() == n.schema()) match = op;
  if (!match)
    for (const auto& op : ops)
      if (op->schema().overload_name() == n.overload() && (n.schema() || !op->schema().is_vararg())) {
        match = op;
        break;
      }
  if (match && match->hasOperation()) {
    ResolvedOp r;
    r.op = match->getOperation();
    r.schema = &match->schema();
    r.pushInputCount = match->schema().is_vararg();
    return r;
  }
  if (ops.empty())
    if (QdqKernel k = qdqKernel(n.target(), n.overload())) {
      ResolvedOp r;
      r.qdq = k;
      r.schema = qdqSchema(n.target(), n.overload());
      return r;
    }
  if (auto viaNode = resolveThroughTorchScriptNode(n)) return *viaNode;
  if (ops.empty())
    fail(n, "no implementation of operator '" + n.target() +
                "' is registered (load the library that defines it: --load-ops LIB.so)");
  fail(n, "operator '" + n.qualifiedTarget() + "' has no implementation for these arguments");
}

std::vector<c10::IValue> callResolved(const Node& n, ResolvedOp& r, Stack args) {
  try {
    if (r.prim) {
      auto outs = r.prim(n, args);
      if (outs.size() != n.numOutputs())
        fail(n, "produced " + std::to_string(outs.size()) + " values for " +
                    std::to_string(n.numOutputs()) + " outputs");
      return outs;
    }
    if (r.schema && !r.schema->is_vararg()) {
      const auto& formals = r.schema->arguments();
      if (args.size() > formals.size())
        fail(n, "has " + std::to_string(args.size()) + " arguments; the schema takes " +
                    std::to_string(formals.size()));
      for (size_t i = args.size(); i < formals.size(); ++i) {
        if (!formals[i].default_value()) fail(n, "argument '" + formals[i].name() + "' is missing");
        args.push_back(*formals[i].default_value());
      }
    }
    if (r.pushInputCount) args.emplace_back(static_cast<int64_t>(n.numArgs()));
    if (r.qdq) args = r.qdq(args);
    else r.op(args);
  } catch (const InterpreterError&) {
    throw;
  } catch (const std::exception& e) {
    throw InterpreterError(describe(n) + " failed: " + torchErrorMessage(e));
  }
  if (args.size() != n.numOutputs())
    fail(n, "the operator returned " + std::to_string(args.size()) + " values for " +
                std::to_string(n.numOutputs()) + " outputs");
  return args;
}

}  // namespace

// ------------------------------------------------------------ Interpreter

struct Interpreter::Impl {
  const Graph& graph;
  InterpreterOptions options;
  std::set<std::string> writtenConstants;
  std::unordered_map<const Node*, ResolvedOp> ops;
  // Values to release once a node has run (their last use is that node).
  std::unordered_map<const Node*, std::vector<const Value*>> releaseAfter;
  std::unordered_map<const Value*, c10::IValue> env;
  std::unordered_map<std::string, c10::IValue> moduleState;  // this run's writes to module state

  Impl(const Graph& g, InterpreterOptions o) : graph(g), options(std::move(o)) {
    if (options.protectConstants) writtenConstants = MutationAnalysis(g).writtenConstants();
    planReleases(*g.block());
  }

  // Each value defined in a block is released after the last node of that
  // block that uses it (a use inside a nested block counts as a use by the
  // node owning that block); unused results right after their node.
  void planReleases(const Block& b) {
    std::unordered_map<const Node*, size_t> position;
    size_t i = 0;
    for (const Node* n : b) position[n] = i++;
    auto plan = [&](const Value* v, const Node* definer) {
      const Node* last = v->hasUses() ? nullptr : definer;
      for (const Use& u : v->uses()) {
        const Node* a = u.user->ancestorIn(&b);
        if (!a) return;  // used out of scope: keep it
        if (!last || position.at(a) > position.at(last)) last = a;
      }
      if (last) releaseAfter[last].push_back(v);
    };
    for (const auto& p : b.params()) plan(p.get(), nullptr);
    for (const Node* n : b) {
      for (const auto& out : n->outputs()) plan(out.get(), n);
      for (const auto& nested : n->blocks()) planReleases(*nested);
    }
  }

  void bind(const Value* v, c10::IValue iv) {
    if (options.observer) options.observer(*v, iv);
    env[v] = std::move(iv);
  }

  c10::IValue valueOf(const Node& user, const Arg& a) const {
    if (a.isLiteral()) return a.literal().toIValue();
    auto it = env.find(a.value());
    if (it == env.end())
      fail(user, "%" + a.value()->name() + " has no value (used outside its scope or before it is defined)");
    return it->second;
  }

  Stack argumentsOf(const Node& n) const {
    Stack args;
    args.reserve(n.numArgs());
    for (const Arg& a : n.args()) args.push_back(valueOf(n, a));
    return args;
  }

  void release(const Node* n) {
    auto it = releaseAfter.find(n);
    if (it == releaseAfter.end()) return;
    for (const Value* v : it->second) env.erase(v);
  }

  std::vector<c10::IValue> runBlock(const Block& b) {
    for (const Node* n : b) {
      switch (n->opcode()) {
        case Opcode::Placeholder: break;  // bound by run()
        case Opcode::GetAttr: bind(n->output(), constant(*n)); break;
        case Opcode::CallFunction: runNode(*n); break;
        case Opcode::Output: {
          std::vector<c10::IValue> outs = argumentsOf(*n);
          release(n);
          return outs;
        }
      }
      release(n);
    }
    throw InterpreterError("a block has no output node");
  }

  c10::IValue constant(const Node& n) const {
    if (!graph.constants().contains(n.target()))
      fail(n, "constant '" + n.target() + "' is not in the constant table");
    const c10::IValue& iv = graph.constants().at(n.target());
    if (!writtenConstants.count(n.target())) return iv;
    if (iv.isTensor()) return iv.toTensor().clone(at::MemoryFormat::Preserve);
    return iv.deepcopy();
  }

  void runNode(const Node& n) {
    if (const std::string* path = statePath(n)) return runModuleState(n, *path);
    if (n.is("prim::If")) return runIf(n);
    if (n.is("prim::Loop")) return runLoop(n);
    if (!n.blocks().empty()) fail(n, "the interpreter does not know how to run its nested blocks");
    auto it = ops.find(&n);
    if (it == ops.end()) it = ops.emplace(&n, resolve(n)).first;
    ResolvedOp& op = it->second;
    std::vector<c10::IValue> outs =
        options.call ? options.call(n, argumentsOf(n), [&](Stack args) { return callResolved(n, op, std::move(args)); })
                     : callResolved(n, op, argumentsOf(n));
    if (outs.size() != n.numOutputs())
      fail(n, "produced " + std::to_string(outs.size()) + " values for " + std::to_string(n.numOutputs()) + " outputs");
    for (size_t i = 0; i < outs.size(); ++i) bind(n.output(i), std::move(outs[i]));
  }

  // Module state (`self.scales = ...` in torchvision's poolers): writes are
  // seen by later reads of the same run; each run starts from the values at
  // import, copied so the constant table never changes.
  void runModuleState(const Node& n, const std::string& path) {
    if (n.is("prim::SetAttr")) {
      moduleState[path] = valueOf(n, n.arg(0));
      return;
    }
    auto it = moduleState.find(path);
    if (it == moduleState.end()) {
      if (!graph.constants().contains(path)) fail(n, "module state '" + path + "' is not in the constant table");
      const c10::IValue& initial = graph.constants().at(path);
      it = moduleState.emplace(path, initial.isTensor() ? initial.toTensor().clone(at::MemoryFormat::Preserve)
                                                        : initial.deepcopy()).first;
    }
    bind(n.output(), it->second);
  }

  void runIf(const Node& n) {
    if (n.numArgs() != 1 || n.blocks().size() != 2) fail(n, "prim::If needs one condition and two blocks");
    c10::IValue cond = valueOf(n, n.arg(0));
    if (!cond.isBool()) fail(n, "the condition is not a bool");
    std::vector<c10::IValue> outs = runBlock(*n.block(cond.toBool() ? 0 : 1));
    if (outs.size() != n.numOutputs()) fail(n, "the taken block returns a different number of values");
    for (size_t i = 0; i < outs.size(); ++i) bind(n.output(i), std::move(outs[i]));
  }

  void runLoop(const Node& n) {
    if (n.numArgs() < 2 || n.blocks().size() != 1) fail(n, "prim::Loop needs a trip count, a condition and a body");
    const Block& body = *n.block(0);
    const size_t carried = n.numArgs() - 2;
    if (body.params().size() != carried + 1 || n.numOutputs() != carried)
      fail(n, "the body's parameters or the node's outputs do not match its carried values");
    c10::IValue maxTrip = valueOf(n, n.arg(0));
    c10::IValue cond = valueOf(n, n.arg(1));
    if (!maxTrip.isInt() || !cond.isBool()) fail(n, "the trip count must be an int and the condition a bool");
    std::vector<c10::IValue> values;
    for (size_t i = 0; i < carried; ++i) values.push_back(valueOf(n, n.arg(i + 2)));
    const int64_t trips = maxTrip.toInt();
    bool go = cond.toBool();
    for (int64_t trip = 0; trip < trips && go; ++trip) {
      bind(body.param(0), c10::IValue(trip));
      for (size_t i = 0; i < carried; ++i) bind(body.param(i + 1), std::move(values[i]));
      std::vector<c10::IValue> outs = runBlock(body);
      if (outs.size() != carried + 1) fail(n, "the body returns a different number of values");
      if (!outs[0].isBool()) fail(n, "the body's condition is not a bool");
      go = outs[0].toBool();
      for (size_t i = 0; i < carried; ++i) values[i] = std::move(outs[i + 1]);
    }
    for (const auto& p : body.params()) env.erase(p.get());
    for (size_t i = 0; i < carried; ++i) bind(n.output(i), std::move(values[i]));
  }
};

Interpreter::Interpreter(const Graph& graph, InterpreterOptions options)
    : impl_(std::make_unique<Impl>(graph, std::move(options))) {}

Interpreter::~Interpreter() = default;

std::vector<c10::IValue> Interpreter::run(std::vector<c10::IValue> inputs) {
  const auto params = impl_->graph.inputs();
  if (inputs.size() != params.size())
    throw InterpreterError("the graph takes " + std::to_string(params.size()) + " inputs, got " +
                           std::to_string(inputs.size()));
  c10::AutoGradMode noGrad(false);
  impl_->env.clear();
  impl_->moduleState.clear();
  for (size_t i = 0; i < params.size(); ++i) impl_->bind(params[i], std::move(inputs[i]));
  std::vector<c10::IValue> outs;
  try {
    outs = impl_->runBlock(*impl_->graph.block());
  } catch (...) {
    impl_->env.clear();
    throw;
  }
  impl_->env.clear();
  return outs;
}

c10::IValue Interpreter::runMethod(std::vector<c10::IValue> inputs) {
  std::vector<c10::IValue> outs = run(std::move(inputs));
  if (outs.size() == 1) return std::move(outs[0]);
  return c10::ivalue::Tuple::create(std::move(outs));
}

std::vector<c10::IValue> Interpreter::evaluateNode(const Node& n, std::vector<c10::IValue> args) {
  if (!n.blocks().empty()) fail(n, "evaluateNode cannot run nodes with nested blocks");
  if (args.size() != n.numArgs())
    fail(n, "evaluateNode got " + std::to_string(args.size()) + " values for " +
                std::to_string(n.numArgs()) + " arguments");
  c10::AutoGradMode noGrad(false);
  ResolvedOp op = resolve(n);
  return callResolved(n, op, std::move(args));
}

TensorMeta metaOf(const at::Tensor& t) {
  TensorMeta m;
  if (!t.defined()) return m;
  m.dtype = t.scalar_type();
  m.device = t.device();
  // Values whose sizes cannot be asked (the nested tensors of
  // nn.TransformerEncoder's padded fast path, other opaque tensors) keep an
  // unknown shape and layout: passes that need them decline, the rest run.
  if (t.is_nested()) return m;
  try {
    m.shape = t.sizes().vec();
  } catch (const std::exception&) {
    return m;
  }
  if (t.layout() == c10::kStrided) {
    if (t.is_contiguous()) m.memoryFormat = c10::MemoryFormat::Contiguous;
    else if (t.is_contiguous(c10::MemoryFormat::ChannelsLast)) m.memoryFormat = c10::MemoryFormat::ChannelsLast;
    else if (t.is_contiguous(c10::MemoryFormat::ChannelsLast3d)) m.memoryFormat = c10::MemoryFormat::ChannelsLast3d;
  }
  return m;
}

c10::IValue callOperator(const char* name, const char* overload, std::vector<c10::IValue> args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  torch::jit::Stack stack(std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  op.callBoxed(&stack);
  return stack.at(0);
}

}  // namespace ptopt::ir
