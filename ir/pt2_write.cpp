// Writing ptopt IR as a PT2 archive (see pt2.h). Built in the PyTorch 2.x
// world only.
#include "ir/pt2.h"
#include "ir/pt2_json.h"

#include "ir/interpreter.h"
#include "ir/pt2_int8.h"
#include "ir/specialize.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/version.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace ptopt::ir {

namespace {

using Json = nlohmann::json;

// What running the graph once showed of a tensor value.
struct Observed {
  c10::ScalarType dtype = c10::kFloat;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  c10::Device device = c10::kCPU;
};

Observed observe(const at::Tensor& t) {
  Observed o;
  o.dtype = t.scalar_type();
  o.sizes = t.sizes().vec();
  o.strides = t.strides().vec();
  o.offset = t.storage_offset();
  o.device = t.device();
  return o;
}

Json tensorMetaJson(const Observed& o, bool requiresGrad, const Json* sizes = nullptr, const Json* strides = nullptr) {
  return {{"dtype", pt2json::scalarTypeEnum(o.dtype)},
          {"sizes", sizes ? *sizes : pt2json::symInts(o.sizes)},
          {"requires_grad", requiresGrad},
          {"device", pt2json::deviceJson(o.device)},
          {"strides", strides ? *strides : pt2json::symInts(o.strides)},
          {"storage_offset", {{"as_int", o.offset}}},
          {"layout", pt2json::kStridedLayout}};
}

bool isIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

std::string identifierFrom(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "v_" + out;
  return out;
}

// The target a dynamic program writes for an int op on sizes
// (`_operator.mul` for aten::mul.int); a TorchScript aten::size is
// torch.export's sym_size.
std::optional<std::string> sizeOpTarget(const Node* n) {
  if (n->qualifiedTarget() == "aten::size.int") return "torch.ops.aten.sym_size.int";
  return pt2json::targetOfSizeOp(n->qualifiedTarget());
}

// Module paths `ep.module()` can rebuild: segments that are identifiers or
// indices, and no path that is a prefix of another (`c.weight` cannot be
// both a tensor and a module).
std::map<std::string, std::string> moduleSafePaths(const std::vector<std::string>& names) {
  std::set<std::string> all(names.begin(), names.end());
  std::map<std::string, std::string> out;
  std::set<std::string> taken;
  auto segmentsOk = [](const std::string& path) {
    size_t start = 0;
    while (true) {
      const size_t dot = path.find('.', start);
      const std::string seg = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      bool digits = !seg.empty() && std::all_of(seg.begin(), seg.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
      if (!digits && !isIdentifier(seg)) return false;
      if (dot == std::string::npos) return true;
      start = dot + 1;
    }
  };
  for (const std::string& n : names) {
    bool prefix = false;
    for (auto it = all.upper_bound(n); it != all.end() && it->rfind(n + ".", 0) == 0; ++it) prefix = true;
    if (segmentsOk(n) && !prefix) {
      out[n] = n;
      taken.insert(n);
    }
  }
  for (const std::string& n : names) {
    if (out.count(n)) continue;
    std::string base = "ptopt_" + identifierFrom(n), name = base;
    for (int i = 1; taken.count(name) || all.count(name); ++i) name = base + "_" + std::to_string(i);
    out[n] = name;
    taken.insert(name);
  }
  return out;
}

class Pt2Writer {
 public:
  Pt2Writer(const Model& model, const std::vector<c10::IValue>& inputs, const Pt2Program* program,
            std::vector<std::string>* notes)
      : graph_(model.forward()), program_(program), inputs_(inputs), notes_(notes) {
    runAt(inputs, 0);
    if (program_ && program_->shapes.dynamic()) runAtSamplePoints();
  }

  std::string write() {
    collect();
    Json graph = {{"inputs", Json::array()},          {"outputs", Json::array()},
                  {"nodes", Json::array()},           {"tensor_values", Json::object()},
                  {"sym_int_values", Json::object()}, {"sym_bool_values", Json::object()},
                  {"is_single_tensor_return", false}, {"custom_obj_values", Json::object()},
                  {"sym_float_values", Json::object()}};
    Json inputSpecs = Json::array();
    // Parameters, then buffers, then user inputs: the order torch.export uses.
    for (bool params : {true, false})
      for (const auto& c : constants_) {
        if (c.isParam != params) continue;
        graph["inputs"].push_back({{"as_tensor", {{"name", c.placeholder}}}});
        if (params)
          inputSpecs.push_back(
              {{"parameter", {{"arg", {{"name", c.placeholder}}}, {"parameter_name", c.fqn}}}});
        else
          inputSpecs.push_back(
              {{"buffer", {{"arg", {{"name", c.placeholder}}}, {"buffer_name", c.fqn}, {"persistent", true}}}});
        tensorValues_[c.placeholder] = tensorMetaJson(observe(c.tensor), params);
      }
    std::vector<std::string> argNames;
    for (Value* in : graph_.inputs()) {
      if (!in->isTensor())
        throw std::invalid_argument("input %" + in->name() + " is not a tensor (" + in->type()->str() +
                                    "); a torch.export program here takes tensors only");
      graph["inputs"].push_back({{"as_tensor", {{"name", nameOf(in)}}}});
      inputSpecs.push_back({{"user_input", {{"arg", {{"as_tensor", {{"name", nameOf(in)}}}}}}}});
      recordTensor(in);
      argNames.push_back(nameOf(in));
    }
    for (Node* n : *graph_.block())
      if (n->is("prim::ListConstruct")) listNow_[n->output()] = n->args();
      else if (appends_.count(n)) listNow_[n->argValue(0)].push_back(n->arg(1));
      else if (n->isCall() && !skipped_.count(n)) graph["nodes"].push_back(nodeJson(n));
    Json outputSpecs = Json::array();
    for (const Arg& a : returned_) {
      Json arg = a.isValue() ? Json{{"as_tensor", {{"name", nameOf(a.value())}}}} : pt2json::literalJson(a.literal());
      graph["outputs"].push_back(arg);
      outputSpecs.push_back({{"user_output", {{"arg", arg}}}});
    }
    graph["tensor_values"] = tensorValues_;
    graph["sym_int_values"] = symIntValues_;

    const bool keepSpecs = program_ && !program_->inSpec.empty() &&
                           program_->forwardArgNames.size() == graph_.inputs().size();
    Json signature = {
        {"inputs", Json::array()},
        {"outputs", Json::array()},
        {"in_spec", keepSpecs ? program_->inSpec : pt2json::flatInSpec(graph_.inputs().size())},
        {"out_spec", keepSpecs && !program_->outSpec.empty() ? program_->outSpec
                                                              : pt2json::flatOutSpec(returned_.size(), tupleOut_)},
        {"forward_arg_names", keepSpecs ? Json(program_->forwardArgNames) : Json(argNames)}};
    const auto [major, minor] = pt2SchemaVersion();
    Json program = {
        {"graph_module",
         {{"graph", graph},
          {"signature", {{"input_specs", inputSpecs}, {"output_specs", outputSpecs}}},
          {"module_call_graph", Json::array({{{"fqn", ""}, {"signature", signature}}})},
          {"metadata", Json::object()},
          {"treespec_namedtuple_fields", Json::object()}}},
        {"opset_version", {{"aten", PTOPT_PT2_ATEN_OPSET}}},
        {"range_constraints", rangeConstraints()},
        {"schema_version", {{"major", major}, {"minor", minor}}},
        {"verifiers", Json::array({"TRAINING"})},
        {"torch_version", TORCH_VERSION},
        {"guards_code", Json::array()}};
    return archive(program.dump());
  }

 private:
  struct Constant {
    std::string fqn, placeholder;
    at::Tensor tensor;
    bool isParam = false;
  };

  // Runs the graph at sample point `k` (0: the inputs given), recording
  // every tensor value's metadata and every int value.
  void runAt(const std::vector<c10::IValue>& inputs, size_t k) {
    InterpreterOptions options;
    options.observer = [this, k](const Value& v, const c10::IValue& iv) {
      if (iv.isTensor() && iv.toTensor().defined()) {
        auto& at = observedAt_[&v];
        at.resize(k + 1);
        at[k] = observe(iv.toTensor());
        if (k == 0) observed_[&v] = at[0];
      } else if (iv.isInt()) {
        auto& at = intsAt_[&v];
        at.resize(k + 1);
        at[k] = iv.toInt();
      } else if (iv.isTensorList() && k == 0) {
        auto& list = lists_[&v];
        list.clear();
        for (const at::Tensor& t : iv.toTensorList().vec()) list.push_back(observe(t));
      }
    };
    try {
      Interpreter(graph_, options).run(inputs);
    } catch (const std::exception& e) {
      if (k == 0)
        throw std::invalid_argument(std::string("cannot run the model to record its tensors' metadata: ") + e.what());
      std::vector<std::string> at;
      for (const auto& [symbol, value] : sizes_->points()[k]) at.push_back(symbol + "=" + std::to_string(value));
      throw std::invalid_argument(fmt::format(
          "the graph does not run at {} (within the program's dynamic ranges), so its sizes cannot be written "
          "symbolic: {}. If IN runs there, a pass made a size static: see whether --passes '' writes it, and "
          "report it with the model",
          fmt::join(at, ", "), e.what()));
    }
  }

  // A dynamic program: runs at the sample points (pt2_symbols.h), inputs of
  // the given dtypes and the sizes of each point, zeros.
  void runAtSamplePoints() {
    const Pt2Shapes& shapes = program_->shapes;
    std::vector<std::vector<int64_t>> given;
    for (const c10::IValue& v : inputs_) given.push_back(v.isTensor() ? v.toTensor().sizes().vec() : std::vector<int64_t>{});
    sizes_.emplace(shapes, shapes.samplePoints(shapes.valuesFor(given)));
    for (size_t k = 1; k < sizes_->points().size(); ++k) {
      auto sizes = shapes.inputSizesAt(sizes_->points()[k], given);
      if (!sizes)
        throw std::invalid_argument("an input's dynamic size is an expression ptopt cannot evaluate; export with "
                                    "that input's sizes as plain dimensions (torch.export.Dim)");
      std::vector<c10::IValue> inputs;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        if (!inputs_[i].isTensor()) {
          inputs.push_back(inputs_[i]);
          continue;
        }
        const at::Tensor& t = inputs_[i].toTensor();
        at::Tensor z = at::zeros((*sizes)[i], t.options());
        if (t.is_contiguous(c10::MemoryFormat::ChannelsLast) && !t.is_contiguous() && z.dim() == 4)
          z = z.contiguous(c10::MemoryFormat::ChannelsLast);
        inputs.emplace_back(z);
      }
      runAt(inputs, k);
    }
  }

  // A size's JSON: a number, or the expression its values at the sample
  // points match; `what` names it for the refusal.
  Json symInt(const SizeTrace& trace, const std::string& what) const {
    std::optional<int64_t> constant;
    auto expr = sizes_->match(trace, &constant);
    if (constant) return {{"as_int", *constant}};
    if (!expr) {
      std::vector<std::string> seen;
      for (size_t k = 0; k < trace.size(); ++k) seen.push_back(std::to_string(trace[k]));
      throw std::invalid_argument(fmt::format(
          "{} takes the values {} at the sample sizes, which no expression of the program's symbols ptopt "
          "knows gives; export with that dimension static, or write TorchScript (--to torchscript)",
          what, fmt::join(seen, ", ")));
    }
    return {{"as_expr", {{"expr_str", *expr}, {"hint", {{"as_int", trace[0]}}}}}};
  }

  // The sizes and strides of a value of a dynamic program, symbolic where
  // they vary.
  Json tensorMetaAtPoints(const Value* v) const {
    const auto& at = observedAt_.at(v);
    if (at.size() != sizes_->points().size())
      throw std::invalid_argument("%" + v->name() + " was not computed at every sample size; a torch.export "
                                  "program here cannot hold it");
    Json sizes = Json::array(), strides = Json::array();
    for (size_t d = 0; d < at[0].sizes.size(); ++d) {
      SizeTrace sz, st;
      for (const Observed& o : at) {
        if (o.sizes.size() != at[0].sizes.size())
          throw std::invalid_argument("%" + v->name() + "'s rank varies with the input sizes");
        sz.push_back(o.sizes[d]);
        st.push_back(o.strides[d]);
      }
      sizes.push_back(symInt(sz, fmt::format("size {} of %{}", d, v->name())));
      strides.push_back(symInt(st, fmt::format("stride {} of %{}", d, v->name())));
    }
    return tensorMetaJson(at[0], false, &sizes, &strides);
  }

  // range_constraints: the program's, as it was read.
  Json rangeConstraints() const {
    Json out = Json::object();
    if (!program_) return out;
    for (const auto& [symbol, r] : program_->shapes.ranges)
      out[symbol] = {{"min_val", r.min}, {"max_val", r.max ? Json(*r.max) : Json(nullptr)}};
    return out;
  }

  [[noreturn]] void cannot(const Node* n, const std::string& why) const {
    std::string where = n->sourceLocation().empty() ? "" : " (" + n->sourceLocation() + ")";
    throw std::invalid_argument("cannot write " + n->qualifiedTarget() + " producing %" +
                                (n->numOutputs() ? n->output()->name() : std::string("?")) + where +
                                " as a torch.export program: " + why);
  }

  // Names, constants, the nodes that fold into their users, and the outputs.
  void collect() {
    std::set<std::string> used;
    auto name = [&](const Value* v, const std::string& base) {
      std::string n = identifierFrom(base), candidate = n;
      for (int i = 1; used.count(candidate); ++i) candidate = n + "_" + std::to_string(i);
      used.insert(candidate);
      names_[v] = candidate;
    };
    std::vector<std::string> fqns;
    for (Node* n : *graph_.block())
      if (n->opcode() == Opcode::GetAttr) fqns.push_back(n->target());
    const auto paths = moduleSafePaths(fqns);
    std::set<std::string> params;
    if (program_) params.insert(program_->parameters.begin(), program_->parameters.end());
    for (Value* in : graph_.inputs()) name(in, in->name());
    for (Node* n : *graph_.block()) {
      if (!n->blocks().empty()) cannot(n, "control flow (prim::If/Loop) has no torch.export form here; "
                                          "give input shapes that fix the branch, or keep TorchScript");
      if (n->opcode() == Opcode::GetAttr) {
        const c10::IValue& v = graph_.constants().at(n->target());
        if (!v.isTensor())
          cannot(n, "constant " + n->target() + " is a " + v.type()->str() + " (packed int8 weights?), which a "
                    "torch.export program here cannot hold; write TorchScript for it (--to torchscript, or an OUT "
                    "ending in .pt)");
        if (v.toTensor().layout() != c10::kStrided || v.toTensor().is_quantized())
          cannot(n, "constant " + n->target() + " is a " + std::string(v.toTensor().is_quantized() ? "quantized" : "non-dense") +
                    " tensor, which a torch.export program here cannot hold; write TorchScript for it (--to torchscript)");
        Constant c;
        c.fqn = paths.at(n->target());
        c.tensor = v.toTensor();
        // A program's parameters stay parameters; everything else (a
        // TorchScript model's constants, folded weights) is a buffer: an
        // inference program's tensors need no gradient.
        c.isParam = params.count(n->target()) && (c.tensor.is_floating_point() || c.tensor.is_complex());
        name(n->output(), (c.isParam ? "p_" : "b_") + identifierFrom(c.fqn));
        c.placeholder = names_[n->output()];
        constants_.push_back(c);
      } else if (n->isCall()) {
        for (const auto& out : n->outputs()) name(out.get(), out->name());
        // FX names a node that returns several values (or a list) apart
        // from the getitem nodes that take them apart.
        if (n->numOutputs() != 1 || !(n->output()->isTensor() || n->output()->type()->kind() == c10::TypeKind::IntType)) {
          std::string base = n->target().substr(n->target().find("::") + 2), candidate = base;
          for (int i = 1; used.count(candidate); ++i) candidate = base + "_" + std::to_string(i);
          used.insert(candidate);
          nodeNames_[n] = candidate;
        }
      }
    }
    for (Node* n : *graph_.block()) {
      if (!n->isCall()) continue;
      const std::string& t = n->target();
      if (t == "prim::ListConstruct") {
        // A list a program builds with append (DenseNet's features): each
        // reader gets the items appended before it (a list is no value of
        // a program, its items are).
        for (const Use& u : n->output()->uses()) {
          if (u.user->is("aten::append") && u.argIndex == 0) {
            if (u.user->output()->hasUses()) cannot(u.user, "the list append returns is used");
            appends_.insert(u.user);
            continue;
          }
          if (!u.user->isCall() || u.user->target().rfind("prim::", 0) == 0)
            cannot(n, "a list used other than as an operator's argument");
          const c10::FunctionSchema* s = u.user->schema();
          if (s && u.argIndex < s->arguments().size() && s->arguments()[u.argIndex].alias_info() &&
              s->arguments()[u.argIndex].alias_info()->isWrite())
            cannot(u.user, "it changes a list in place other than by append");
        }
        skipped_.insert(n);
      } else if (t == "prim::ListUnpack") {
        Node* producer = n->argValue(0)->node();
        if (!producer || !producer->isCall() || !producer->schema())
          cannot(n, "it unpacks a list no operator returned");
        skipped_.insert(n);
      } else if (t == "prim::TupleConstruct") {
        for (const Use& u : n->output()->uses())
          if (u.user->opcode() != Opcode::Output) cannot(n, "a tuple used other than as the model's output");
        skipped_.insert(n);
      } else if (n->is("aten::warn")) {
        // A warning TorchScript code gives on every call; torch.export gives
        // it once, while tracing, and a program has none.
        skipped_.insert(n);
        if (notes_) notes_->push_back("dropped a warning the model gives on every call (aten::warn" +
                                      (n->sourceLocation().empty() ? std::string() : " at " + n->sourceLocation()) +
                                      "): a torch.export program gives none");
      } else if (!n->schema()) {
        cannot(n, "it is a TorchScript-only op with no ATen schema");
      }
    }
    const Arg& out = graph_.block()->outputNode()->arg(0);
    Node* producer = out.isValue() ? out.value()->node() : nullptr;
    if (producer && producer->is("prim::TupleConstruct")) {
      returned_ = producer->args();
      tupleOut_ = true;
    } else {
      returned_ = {out};
    }
    for (const Arg& a : returned_)
      if (a.isValue() && !a.value()->isTensor())
        throw std::invalid_argument("the model returns %" + a.value()->name() + " of type " +
                                    a.value()->type()->str() + "; a torch.export program here returns tensors "
                                    "and constants only");
  }

  const std::string& nameOf(const Value* v) const {
    auto it = names_.find(v);
    if (it == names_.end()) throw std::logic_error("pt2 writer: no name for %" + v->name());
    return it->second;
  }

  void recordTensor(const Value* v) {
    auto it = observed_.find(v);
    if (it != observed_.end()) {
      tensorValues_[nameOf(v)] = sizes_ ? tensorMetaAtPoints(v) : tensorMetaJson(it->second, false);
      return;
    }
    // Never ran (an output ATen left undefined): what shape propagation knows.
    const TensorMeta& m = v->meta();
    Observed o;
    o.dtype = m.dtype.value_or(c10::kFloat);
    o.sizes = m.shape.value_or(std::vector<int64_t>{0});
    o.strides.assign(o.sizes.size(), 1);
    for (size_t i = o.sizes.size(); i-- > 1;) o.strides[i - 1] = o.strides[i] * std::max<int64_t>(o.sizes[i], 1);
    tensorValues_[nameOf(v)] = tensorMetaJson(o, false);
  }

  Json argJson(const Node* n, size_t i) {
    const Arg& a = n->arg(i);
    const c10::Argument& formal = n->schema()->arguments().at(i);
    if (a.isLiteral()) return pt2json::literalJson(a.literal());
    Value* v = a.value();
    if (v->isTensor()) return {{"as_tensor", {{"name", nameOf(v)}}}};
    if (sizes_ && v->type()->kind() == c10::TypeKind::IntType) return {{"as_sym_int", {{"as_name", nameOf(v)}}}};
    Node* list = v->node();
    if (list && list->is("prim::ListConstruct")) {
      const c10::TypePtr element = v->type()->containedTypes().empty() ? nullptr : v->type()->containedTypes()[0];
      const bool optional = element && element->kind() == c10::TypeKind::OptionalType;
      const bool tensors = element && (element->kind() == c10::TypeKind::TensorType ||
                                       (optional && element->containedTypes()[0]->kind() == c10::TypeKind::TensorType));
      if (!tensors && sizes_ && element && element->kind() == c10::TypeKind::IntType) return symIntList(n, formal, listNow_.at(v));
      if (!tensors) return literalList(n, formal, listNow_.at(v));
      Json items = Json::array();
      for (const Arg& item : listNow_.at(v)) {
        if (!optional) {
          items.push_back({{"name", nameOf(item.value())}});
        } else if (item.isLiteral()) {
          items.push_back({{"as_none", true}});
        } else {
          items.push_back({{"as_tensor", {{"name", nameOf(item.value())}}}});
        }
      }
      return {{optional ? "as_optional_tensors" : "as_tensors", items}};
    }
    cannot(n, "its argument " + formal.name() + " is a " + v->type()->str() +
                  " computed at run time; give fixed input shapes so that it folds to a constant");
  }

  // A dynamic program's int list: sizes computed at run time by name.
  Json symIntList(const Node* n, const c10::Argument& formal, const std::vector<Arg>& items) {
    Json out = Json::array();
    for (const Arg& a : items) {
      if (a.isLiteral() && a.literal().is<int64_t>()) out.push_back({{"as_int", a.literal().as<int64_t>()}});
      else if (a.isValue() && a.value()->type()->kind() == c10::TypeKind::IntType)
        out.push_back({{"as_name", nameOf(a.value())}});
      else cannot(n, "its argument " + formal.name() + " is a list of sizes with an item that is not an int");
    }
    return {{"as_sym_ints", out}};
  }

  // A list of literals built by prim::ListConstruct (`Scalar?[]`, `int[]`
  // with an element the IR keeps as a value otherwise): the JSON list its
  // elements' kind gives; an empty one by the schema's element type.
  Json literalList(const Node* n, const c10::Argument& formal, const std::vector<Arg>& listItems) {
    std::vector<Literal> items;
    for (const Arg& a : listItems) {
      if (!a.isLiteral() || a.literal().isNone())
        cannot(n, "its argument " + formal.name() + " is a list computed at run time (sizes?); give fixed input "
                  "shapes so that it folds to a constant");
      items.push_back(a.literal());
    }
    auto all = [&](auto pred) { return std::all_of(items.begin(), items.end(), pred); };
    if (items.empty()) {
      c10::TypePtr element = formal.type();
      if (element->kind() == c10::TypeKind::OptionalType) element = element->containedTypes()[0];
      element = element->containedTypes().empty() ? element : element->containedTypes()[0];
      if (element->kind() == c10::TypeKind::OptionalType) element = element->containedTypes()[0];
      switch (element->kind()) {
        case c10::TypeKind::BoolType: return {{"as_bools", Json::array()}};
        case c10::TypeKind::FloatType: return {{"as_floats", Json::array()}};
        case c10::TypeKind::StringType: return {{"as_strings", Json::array()}};
        case c10::TypeKind::TensorType: return {{"as_tensors", Json::array()}};
        default: return {{"as_ints", Json::array()}};  // int, SymInt, Scalar: torch.export.load gives []
      }
    }
    if (all([](const Literal& l) { return l.is<int64_t>(); })) {
      std::vector<int64_t> v;
      for (const Literal& l : items) v.push_back(l.as<int64_t>());
      return {{"as_ints", v}};
    }
    if (all([](const Literal& l) { return l.is<bool>(); })) {
      std::vector<bool> v;
      for (const Literal& l : items) v.push_back(l.as<bool>());
      return {{"as_bools", v}};
    }
    if (all([](const Literal& l) { return l.is<double>() || l.is<int64_t>(); })) {
      Json v = Json::array();
      for (const Literal& l : items) v.push_back(pt2json::numberJson(l.is<double>() ? l.as<double>() : double(l.as<int64_t>())));
      return {{"as_floats", v}};
    }
    cannot(n, "its argument " + formal.name() + " is a list of mixed constants torch.export cannot spell");
  }

  Json nodeJson(const Node* n) {
    Json inputs = Json::array();
    const auto& formals = n->schema()->arguments();
    if (n->numArgs() != formals.size()) cannot(n, "its arguments do not match its schema");
    for (size_t i = 0; i < formals.size(); ++i)
      inputs.push_back({{"name", formals[i].name()}, {"arg", argJson(n, i)}, {"kind", formals[i].kwarg_only() ? 2 : 1}});
    Json outputs = Json::array();
    for (size_t i = 0; i < n->numOutputs(); ++i) {
      Value* v = n->output(i);
      if (v->isTensor()) {
        outputs.push_back({{"as_tensor", {{"name", nameOf(v)}}}});
        recordTensor(v);
        continue;
      }
      const c10::TypePtr& t = v->type();
      if (t->kind() == c10::TypeKind::ListType && t->containedTypes()[0]->kind() == c10::TypeKind::TensorType) {
        outputs.push_back({{"as_tensors", listOutput(n, v)}});
        continue;
      }
      if (sizes_ && t->kind() == c10::TypeKind::IntType && intsAt_.count(v)) {
        outputs.push_back({{"as_sym_int", {{"as_name", nameOf(v)}}}});
        symIntValues_[nameOf(v)] = symInt(intsAt_.at(v), "%" + v->name());
        continue;
      }
      cannot(n, "it returns a " + t->str() + " (a size or number computed at run time); give fixed input "
                "shapes so that it folds to a constant");
    }
    std::string location = n->sourceLocation();
    Json metadata = Json::object();
    if (!location.empty()) metadata["stack_trace"] = "File \"" + location.substr(0, location.rfind(':')) +
                                                     "\", line " + location.substr(location.rfind(':') + 1);
    const auto sizeOp = sizes_ ? sizeOpTarget(n) : std::nullopt;
    return {{"target", sizeOp ? *sizeOp : pt2json::targetOf(n->target(), n->overload())},
            {"inputs", inputs},
            {"outputs", outputs},
            {"metadata", metadata},
            {"is_hop_single_tensor_return", nullptr},
            {"name", nodeNames_.count(n) ? nodeNames_.at(n) : nameOf(n->output(0))}};
  }

  // A Tensor[] result: the names its prim::ListUnpack gives, or new ones.
  Json listOutput(const Node* n, Value* list) {
    Json items = Json::array();
    for (const Use& u : list->uses()) {
      if (!u.user->is("prim::ListUnpack")) continue;
      for (const auto& out : u.user->outputs()) {
        items.push_back({{"name", nameOf(out.get())}});
        recordTensor(out.get());
      }
      return items;
    }
    auto it = lists_.find(list);
    if (it == lists_.end()) cannot(n, "its list result was never computed");
    for (size_t k = 0; k < it->second.size(); ++k) {
      const std::string name = nameOf(list) + "_" + std::to_string(k);
      items.push_back({{"name", name}});
      tensorValues_[name] = tensorMetaJson(it->second[k], false);
    }
    return items;
  }

  // (args, {}) in torch.save's format: a pickle (data.pkl) whose tensors'
  // storages are records of their own, without TorchScript's type tags (a
  // tagged dict needs torch.jit's restore_type_tag, which torch.load's
  // weights_only mode refuses).
  std::string sampleInputs() const {
    std::vector<c10::IValue> args(inputs_.begin(), inputs_.end());
    c10::impl::GenericDict kwargs(c10::StringType::get(), c10::AnyType::get());
    const c10::IValue value = c10::ivalue::Tuple::create({c10::ivalue::Tuple::create(args), kwargs});
    std::string pickled;
    torch::jit::Pickler pickler([&pickled](const char* data, size_t n) { pickled.append(data, n); }, nullptr, nullptr,
                                nullptr, nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(value);
    pickler.stop();
    std::string bytes;
    caffe2::serialize::PyTorchStreamWriter writer([&bytes](const void* data, size_t n) {
      bytes.append(static_cast<const char*>(data), n);
      return n;
    });
    torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
    return bytes;
  }

  std::string archive(const std::string& programJson) {
    std::string bytes;
    // The weights' bytes and a margin for headers and the JSON, at once: no
    // copies as the archive grows.
    size_t weightBytes = 0;
    for (const Constant& c : constants_) weightBytes += static_cast<size_t>(c.tensor.nbytes()) + 256;
    bytes.reserve(weightBytes + 2 * programJson.size() + (1 << 20));
    caffe2::serialize::PyTorchStreamWriter writer([&bytes](const void* data, size_t n) {
      bytes.append(static_cast<const char*>(data), n);
      return n;
    });
    // The zip format's version record (.data/version), as torch.export.save sets it.
    writer.setMinVersion(6);
    auto put = [&writer](const std::string& name, const std::string& data) {
      writer.writeRecord(name, data.data(), data.size());
    };
    put("archive_format", "pt2");
    put("archive_version", "0");
    Json config = Json::object();
    size_t index = 0;
    std::unordered_map<const void*, std::string> written;
    for (const Constant& c : constants_) {
      const at::Tensor t = pt2StoredConstant(c.tensor);
      const std::string path = "weight_" + std::to_string(index++);
      writer.writeRecord("data/weights/" + path, t.data_ptr(), static_cast<size_t>(t.nbytes()));
      Observed o = observe(t);
      o.device = c10::kCPU;
      config[c.fqn] = {{"path_name", path},
                       {"is_param", c.isParam},
                       {"use_pickle", false},
                       {"tensor_meta", tensorMetaJson(o, c.isParam)}};
    }
    const std::string model = program_ ? program_->modelName : "model";
    put("data/weights/" + model + "_weights_config.json", Json{{"config", config}}.dump());
    put("data/constants/" + model + "_constants_config.json", Json{{"config", Json::object()}}.dump());
    put("models/" + model + ".json", programJson);
    // The sample inputs (AOTInductor compiles with them): the program's own,
    // copied as they were, else the inputs the metadata run used, in
    // torch.save's format (args, kwargs), written by LibTorch.
    put("data/sample_inputs/" + model + ".pt", program_ && !program_->sampleInputs.empty() ? program_->sampleInputs
                                                                                          : sampleInputs());
    writer.writeEndOfFile();
    return bytes;
  }

  const Graph& graph_;
  const Pt2Program* program_;
  std::vector<c10::IValue> inputs_;
  std::vector<std::string>* notes_;
  std::unordered_map<const Value*, Observed> observed_;  // at the inputs given
  // A dynamic program: what each value was at each sample point, and the
  // expressions that give its sizes.
  std::unordered_map<const Value*, std::vector<Observed>> observedAt_;
  std::unordered_map<const Value*, SizeTrace> intsAt_;
  std::optional<SizeExpressions> sizes_;
  Json symIntValues_ = Json::object();
  std::unordered_map<const Value*, std::vector<Observed>> lists_;
  std::unordered_map<const Value*, std::string> names_;
  std::unordered_map<const Node*, std::string> nodeNames_;
  std::vector<Constant> constants_;
  std::unordered_set<const Node*> skipped_;
  std::unordered_set<const Node*> appends_;  // aten::append on a list the program builds
  std::unordered_map<const Value*, std::vector<Arg>> listNow_;  // its items so far, in program order
  std::vector<Arg> returned_;
  bool tupleOut_ = false;
  Json tensorValues_ = Json::object();
};

// Whether the graph computes anything but tensors (and the lists and tuples
// that carry them) at run time: TorchScript's checks and size arithmetic.
bool needsSpecializing(const Graph& g) {
  bool needs = false;
  for (Node* n : *g.block()) {
    if (!n->isCall()) continue;
    if (!n->blocks().empty()) needs = true;
    if (n->is("prim::ListConstruct") || n->is("prim::ListUnpack") || n->is("prim::TupleConstruct")) continue;
    for (const auto& o : n->outputs()) {
      const c10::TypeKind k = o->type()->kind();
      if (k != c10::TypeKind::TensorType && k != c10::TypeKind::ListType) needs = true;
    }
  }
  return needs;
}

}  // namespace

std::string writePt2(const Model& model, const std::vector<c10::IValue>& inputs, const Pt2Program* program,
                     std::vector<std::string>* notes) {
  if (!pt2Supported()) throw std::invalid_argument(pt2UnsupportedMessage("write"));
  // int8 is written in PT2E's Q/DQ form (ir/pt2_int8.h), on a copy.
  std::optional<Model> copy;
  if (hasQuantizedOps(model.forward())) {
    copy = model.clone();
    lowerInt8ForPt2(*copy);
  }
  const Model& source = copy ? *copy : model;
  // A dynamic program's sizes are computed at run time, and written so.
  const bool dynamic = program && program->shapes.dynamic();
  if (dynamic || !needsSpecializing(source.forward())) return Pt2Writer(source, inputs, program, notes).write();
  if (!copy) copy = model.clone();
  Specialization s = specializeToInputs(copy->forward(), inputs);
  if (notes) notes->insert(notes->end(), s.notes.begin(), s.notes.end());
  return Pt2Writer(*copy, inputs, program, notes).write();
}

at::Tensor pt2StoredConstant(const at::Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 && static_cast<size_t>(t.nbytes()) == t.storage().nbytes()
             ? t.cpu()
             : t.cpu().contiguous().clone();
}

Model withConstantsAsStoredInPt2(const Model& m) {
  Model copy = m.clone();
  for (const auto& [name, v] : m.constants->entries())
    if (v.isTensor() && !v.toTensor().is_mkldnn() && !v.toTensor().is_quantized())
      copy.constants->set(name, pt2StoredConstant(v.toTensor()));
  return copy;
}

std::vector<c10::IValue> inputsFromMeta(const Graph& forward) {
  std::vector<c10::IValue> out;
  for (Value* in : forward.inputs()) {
    const TensorMeta& m = in->meta();
    if (!in->isTensor() || !m.dtype || !m.shape)
      throw std::invalid_argument("input %" + in->name() + " has no recorded dtype and shape; give example inputs");
    at::Tensor t = at::zeros(*m.shape, at::TensorOptions(*m.dtype));
    if (m.memoryFormat && *m.memoryFormat != c10::MemoryFormat::Contiguous)
      t = t.contiguous(*m.memoryFormat);
    out.emplace_back(t);
  }
  return out;
}

}  // namespace ptopt::ir
