// Reading a PT2 archive into ptopt IR (see pt2.h). Built in the PyTorch 2.x
// world only (pt2_unsupported.cpp stands in for 1.13).
#include "ir/pt2.h"
#include "ir/pt2_json.h"

#include "ir/archive_check.h"
#include "ir/model_format.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <caffe2/serialize/read_adapter_interface.h>

#include <fmt/format.h>
#include <torch/version.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>

namespace ptopt::ir {

// 0.0: the torch built against has no torch.export (1.13).
bool pt2Supported() { return PTOPT_PT2_SCHEMA_MAJOR != 0; }
std::pair<int, int> pt2SchemaVersion() { return {PTOPT_PT2_SCHEMA_MAJOR, PTOPT_PT2_SCHEMA_MINOR}; }

std::string pt2UnsupportedMessage(const std::string& what) {
  return "this ptopt is built against PyTorch " TORCH_VERSION ", which has no torch.export; to " + what +
         " .pt2 programs, build it against PyTorch 2.x (./scripts/setup-torch2.sh && ./scripts/build.sh --world "
         "torch2)";
}

namespace {

using Json = nlohmann::json;

// LibTorch's zip reader over bytes in memory.
class StringReadAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit StringReadAdapter(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string& bytes_;
};

// The records of one archive, by name under its top-level folder.
class Pt2Archive {
 public:
  // `checkCrc` false: bytes this process just wrote (the load back of OUT),
  // whose structure is still checked.
  Pt2Archive(const std::string& bytes, std::string where, bool checkCrc = true) : where_(std::move(where)) {
    ArchiveLimits limits;
    limits.checkCrc = checkCrc;
    const ArchiveCheckResult check = checkZipArchive(std::string_view(bytes), limits);
    if (!check.ok())
      throw InputError("'" + where_ + "' is damaged: " + check.problem + "; export it again, or download it again");
    try {
      reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(std::make_shared<StringReadAdapter>(bytes));
    } catch (const std::exception& e) {
      throw InputError("'" + where_ + "' is not a readable PT2 archive: " + torchErrorMessage(e));
    }
  }
  bool has(const std::string& name) const { return reader_->hasRecord(name); }
  std::string text(const std::string& name, const std::string& what) const {
    if (!has(name))
      throw InputError("'" + where_ + "' has no " + name + " (" + what +
                       "): the archive is incomplete; save it again with torch.export.save");
    auto [data, size] = reader_->getRecord(name);
    return std::string(static_cast<const char*>(data.get()), size);
  }
  Json json(const std::string& name, const std::string& what) const {
    const std::string t = text(name, what);
    try {
      return Json::parse(t);
    } catch (const std::exception& e) {
      throw InputError("'" + where_ + "': " + name + " is not valid JSON (" + e.what() +
                       "); save it again with torch.export.save");
    }
  }
  // A record's bytes as LibTorch's reader allocated them (CPU-allocator
  // aligned), for a tensor to own without a copy.
  std::pair<at::DataPtr, size_t> data(const std::string& name) const {
    auto [data, size] = reader_->getRecord(name);
    return {std::move(data), size};
  }
  std::vector<std::string> records() const { return reader_->getAllRecords(); }
  const std::string& where() const { return where_; }

 private:
  std::string where_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
};

// One tensor of a payload config (weights or constants): raw bytes viewed
// with the sizes, strides and offset the config gives.
at::Tensor payloadTensor(const Pt2Archive& archive, const std::string& folder, const std::string& fqn,
                         const Json& meta, std::unordered_map<std::string, at::Tensor>& storages) {
  const std::string record = folder + pt2json::str(meta, "path_name");
  if (meta.value("use_pickle", false))
    throw InputError("'" + archive.where() + "': " + fqn + " is stored pickled (" + record +
                     ": a tensor subclass); ptopt never unpickles a model file. Save the model with plain "
                     "tensors (e.g. dequantize or unwrap the subclass) and export it again");
  const Json& tm = pt2json::at(meta, "tensor_meta", fqn);
  const c10::ScalarType dtype = pt2json::scalarType(pt2json::at(tm, "dtype", fqn).get<int>(), fqn);
  if (tm.contains("layout") && tm["layout"].get<int>() != pt2json::kStridedLayout)
    throw InputError("'" + archive.where() + "': " + fqn + " is not a strided (dense) tensor; ptopt reads dense "
                     "tensors only: convert it with .to_dense() before exporting");
  const std::vector<int64_t> sizes = pt2json::concreteInts(pt2json::at(tm, "sizes", fqn), fqn + "'s sizes");
  const std::vector<int64_t> strides = pt2json::concreteInts(pt2json::at(tm, "strides", fqn), fqn + "'s strides");
  const int64_t offset = pt2json::concreteInt(pt2json::at(tm, "storage_offset", fqn), fqn + "'s storage offset");
  if (sizes.size() != strides.size() || offset < 0)
    throw InputError("'" + archive.where() + "': " + fqn + "'s metadata is inconsistent (" +
                     std::to_string(sizes.size()) + " sizes, " + std::to_string(strides.size()) +
                     " strides); export it again");
  if (!archive.has(record))
    throw InputError("'" + archive.where() + "' has no " + record + " (the bytes of " + fqn +
                     "): the archive is incomplete; save it again with torch.export.save");
  auto it = storages.find(record);
  if (it == storages.end()) {
    // The tensor owns the record's buffer: no copy.
    auto [data, size] = archive.data(record);
    const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
    if (size % element != 0)
      throw InputError("'" + archive.where() + "': " + record + " holds " + std::to_string(size) +
                       " bytes, not a whole number of " + c10::toString(dtype) + " elements; export it again");
    at::Tensor flat = at::empty({0}, at::TensorOptions(dtype));
    if (size > 0) {
      c10::Storage storage(c10::Storage::use_byte_size_t(), size, std::move(data), /*allocator=*/nullptr,
                           /*resizable=*/false);
      flat.set_(storage, 0, {static_cast<int64_t>(size) / element}, {1});
    }
    it = storages.emplace(record, flat).first;
  }
  const at::Tensor& flat = it->second;
  int64_t needed = offset + 1;
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0)
      throw InputError("'" + archive.where() + "': " + fqn + " has a negative size or stride; export it again");
    if (sizes[d] == 0) empty = true;
    needed += (sizes[d] - 1) * strides[d];
  }
  if (empty) return at::empty(sizes, at::TensorOptions(dtype));
  if (flat.numel() == 0 && needed > 0)
    return at::zeros(sizes, at::TensorOptions(dtype));  // what torch.export.save writes for a tensor without data
  if (needed > flat.numel())
    throw InputError(fmt::format("'{}': {} ({} {}) needs {} elements but {} holds {}; the archive is damaged, "
                                 "export it again",
                                 archive.where(), fqn, c10::toString(dtype), c10::str(c10::IntArrayRef(sizes)),
                                 needed, record, flat.numel()));
  return flat.as_strided(sizes, strides, offset);
}

// Python wraps a number passed for a Tensor argument (`aten.add.Tensor(x,
// 3)` in run_decompositions()'s hardswish); a boxed call does not. The
// overload of the same op that takes a Scalar there and is otherwise the
// same (add.Tensor -> add.Scalar) computes the same: a wrapped number is
// what a Scalar argument becomes.
const c10::FunctionSchema* scalarOverload(const std::string& qualified, const c10::FunctionSchema& schema,
                                          const std::set<std::string>& numbers) {
  for (const auto& op : torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(qualified))) {
    const c10::FunctionSchema& other = op->schema();
    if (other.arguments().size() != schema.arguments().size() || other.returns().size() != schema.returns().size())
      continue;
    bool same = true;
    for (size_t i = 0; i < other.arguments().size() && same; ++i) {
      const c10::Argument& a = schema.arguments()[i];
      const c10::Argument& b = other.arguments()[i];
      same = a.name() == b.name() &&
             (numbers.count(a.name()) ? b.type()->kind() == c10::TypeKind::NumberType : *a.type() == *b.type());
    }
    if (same) return &other;
  }
  return nullptr;
}

std::map<std::string, at::Tensor> readPayloads(const Pt2Archive& archive, const std::string& configRecord,
                                               const std::string& folder, const std::string& what) {
  std::map<std::string, at::Tensor> out;
  if (!archive.has(configRecord)) {
    if (what == "weights")
      throw InputError("'" + archive.where() + "' has no " + configRecord +
                       " (the table of its weights): written by a PyTorch older than 2.8, or incomplete; "
                       "save it again with torch.export.save in PyTorch 2.8 or newer");
    return out;
  }
  const Json config = archive.json(configRecord, "the table of its " + what);
  std::unordered_map<std::string, at::Tensor> storages;
  for (const auto& [fqn, meta] : pt2json::at(config, "config", configRecord).items()) {
    const std::string path = pt2json::str(meta, "path_name");
    if (path.rfind("custom_obj", 0) == 0 || path.rfind("opaque_obj", 0) == 0)
      throw InputError("'" + archive.where() + "': constant " + fqn + " is a custom object (" + path +
                       "); ptopt reads programs whose constants are tensors only");
    out[fqn] = payloadTensor(archive, folder, fqn, meta, storages);
  }
  return out;
}

// run_decompositions() spells two ops every pass reads in pieces; each is
// put back as the dense op where the two compute bitwise the same (both
// call the same kernel), so that passes see one spelling:
//   _native_batch_norm_legit_no_training(x, w, b, mean, var, momentum, eps)
//     whose statistics outputs are unused -> batch_norm(..., training=False)
//   addmm(bias, x, permute(W, [1, 0])) with beta = alpha = 1 and a constant
//     2-D W and 1-D bias -> linear(x, W, bias); mm(x, permute(W, [1, 0]))
//     -> linear(x, W, None)
void replaceNode(Node* old, Node* dense) {
  dense->insertBefore(old);
  dense->setScope(old->scope());
  dense->setSourceLocation(old->sourceLocation());
  Value* out = old->output(0);
  const std::string name = out->name();
  const TensorMeta meta = out->meta();
  out->replaceAllUsesWith(dense->output(0));
  old->destroy();
  dense->output(0)->setName(name);
  dense->output(0)->meta() = meta;
}

bool isLiteralInt(const Arg& a, int64_t v) { return a.isLiteral() && a.literal().is<int64_t>() && a.literal().as<int64_t>() == v; }

// W when `v` is permute(W, [1, 0]) of a 2-D constant W.
Value* transposedConstant(Value* v) {
  Node* p = v ? v->node() : nullptr;
  if (!p || !p->is("aten::permute") || p->numArgs() != 2 || !p->arg(1).isLiteral() ||
      !p->arg(1).literal().is<std::vector<int64_t>>() ||
      p->arg(1).literal().as<std::vector<int64_t>>() != std::vector<int64_t>{1, 0})
    return nullptr;
  Value* w = p->argValue(0);
  if (!w || !w->node() || w->node()->opcode() != Opcode::GetAttr) return nullptr;
  const c10::IValue& t = w->graph().constants().at(w->node()->target());
  return t.isTensor() && t.toTensor().dim() == 2 ? w : nullptr;
}

bool isConstantVector(Value* v) {
  if (!v || !v->node() || v->node()->opcode() != Opcode::GetAttr) return false;
  const c10::IValue& t = v->graph().constants().at(v->node()->target());
  return t.isTensor() && t.toTensor().dim() == 1;
}

void denseSpellings(Graph& g) {
  std::vector<Node*> nodes;
  for (Node* n : *g.block()) nodes.push_back(n);
  for (Node* n : nodes) {
    if (n->is("aten::_native_batch_norm_legit_no_training") && n->numArgs() == 7 && !n->output(1)->hasUses() &&
        !n->output(2)->hasUses()) {
      std::vector<Arg> args = {n->arg(0), n->arg(1), n->arg(2), n->arg(3), n->arg(4), false, n->arg(5), n->arg(6), true};
      replaceNode(n, g.createCall("aten::batch_norm", std::move(args), {c10::TensorType::get()}));
    } else if (n->is("aten::addmm") && n->numArgs() == 5 && isLiteralInt(n->arg(3), 1) && isLiteralInt(n->arg(4), 1)) {
      Value* w = transposedConstant(n->argValue(2));
      if (!w || !isConstantVector(n->argValue(0))) continue;
      Node* permute = n->argValue(2)->node();
      replaceNode(n, g.createCall("aten::linear", {n->arg(1), w, n->arg(0)}, {c10::TensorType::get()}));
      if (!permute->output()->hasUses()) permute->destroy();
    } else if (n->is("aten::mm") && n->numArgs() == 2) {
      Value* w = transposedConstant(n->argValue(1));
      if (!w) continue;
      Node* permute = n->argValue(1)->node();
      replaceNode(n, g.createCall("aten::linear", {n->arg(0), w, Literal(NoneLiteral{})}, {c10::TensorType::get()}));
      if (!permute->output()->hasUses()) permute->destroy();
    }
  }
}

// Graph building.
class Pt2Importer {
 public:
  Pt2Importer(const Pt2Archive& archive, const Json& program, Pt2ReadResult& out)
      : archive_(archive), program_(program), out_(out) {}

  void run() {
    const Json& gm = pt2json::at(program_, "graph_module", "the program");
    const Json& graph = pt2json::at(gm, "graph", "graph_module");
    tensorValues_ = &pt2json::at(graph, "tensor_values", "graph");
    readCallingConvention(gm);
    readSymbols(graph);
    weights_ = readPayloads(archive_, "data/weights/" + out_.program.modelName + "_weights_config.json",
                            "data/weights/", "weights");
    constants_ = readPayloads(archive_, "data/constants/" + out_.program.modelName + "_constants_config.json",
                              "data/constants/", "constants");
    auto g = std::make_unique<Graph>(out_.model.constants);
    graph_ = g.get();
    readInputs(pt2json::at(gm, "signature", "graph_module"));
    for (const Json& node : pt2json::at(graph, "nodes", "graph")) readNode(node);
    readOutputs(graph, pt2json::at(gm, "signature", "graph_module"));
    denseSpellings(*g);
    out_.model.methods.emplace_back("forward", std::move(g));
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw InputError("'" + archive_.where() + "': " + message);
  }

  void readCallingConvention(const Json& gm) {
    for (const Json& entry : gm.value("module_call_graph", Json::array())) {
      if (entry.value("fqn", std::string("x")) != "" || !entry.contains("signature") || entry["signature"].is_null())
        continue;
      const Json& sig = entry["signature"];
      out_.program.inSpec = sig.value("in_spec", std::string());
      out_.program.outSpec = sig.value("out_spec", std::string());
      out_.program.forwardArgNames = sig.value("forward_arg_names", std::vector<std::string>{});
    }
  }

  // The symbols and their ranges (range_constraints), and the int values'
  // expressions (sym_int_values); sym floats and bools are not read.
  void readSymbols(const Json& graph) {
    Pt2Shapes& shapes = out_.program.shapes;
    const Json ranges = program_.value("range_constraints", Json::object());
    for (const auto& [symbol, range] : ranges.items()) {
      Pt2Shapes::Range r;
      const Json lo = range.value("min_val", Json()), hi = range.value("max_val", Json());
      r.min = lo.is_number_integer() ? lo.get<int64_t>() : 0;
      // torch.export writes an unbounded maximum as null or as int64's
      // largest values (int_oo).
      if (hi.is_number_integer() && hi.get<int64_t>() < (int64_t{1} << 62)) r.max = hi.get<int64_t>();
      shapes.ranges[symbol] = r;
    }
    const Json symInts = graph.value("sym_int_values", Json::object());
    for (const auto& [name, value] : symInts.items())
      if (value.contains("as_expr")) noteExpression(value["as_expr"]);
    for (const char* kind : {"sym_float_values", "sym_bool_values"})
      if (!graph.value(kind, Json::object()).empty())
        fail(std::string("the program computes symbolic ") + (kind[4] == 'f' ? "floats" : "booleans") +
             " (run-time checks or scales of dynamic sizes); ptopt reads dynamic programs whose symbolic "
             "values are sizes: export with those dimensions static");
  }

  // A SymInt's value at the hints, noting its expression.
  std::optional<int64_t> hintOf(const Json& symInt) {
    if (!symInt.is_object()) return std::nullopt;
    if (symInt.contains("as_int")) return symInt["as_int"].get<int64_t>();
    if (!symInt.contains("as_expr")) return std::nullopt;
    return noteExpression(symInt["as_expr"]);
  }
  std::optional<int64_t> noteExpression(const Json& symExpr) {
    std::optional<int64_t> hint;
    const Json h = symExpr.value("hint", Json());
    if (h.is_object() && h.contains("as_int")) hint = h["as_int"].get<int64_t>();
    out_.program.shapes.noteExpression(pt2json::str(symExpr, "expr_str"), hint);
    return hint;
  }
  std::optional<std::vector<int64_t>> hintsOf(const Json& list) {
    if (!list.is_array()) return std::nullopt;
    std::vector<int64_t> out;
    bool all = true;
    for (const Json& s : list) {
      auto v = hintOf(s);
      if (!v) all = false;
      else out.push_back(*v);
    }
    if (!all) return std::nullopt;
    return out;
  }

  // Sizes and strides as at the hints (a dynamic size's value there).
  void setMeta(Value* v, const std::string& name) {
    if (!tensorValues_->contains(name)) return;
    const Json& tm = (*tensorValues_)[name];
    TensorMeta& meta = v->meta();
    meta.dtype = pt2json::scalarType(tm.value("dtype", 0), name);
    if (auto sizes = hintsOf(tm.value("sizes", Json::array()))) meta.shape = *sizes;
    if (tm.contains("device")) meta.device = pt2json::device(tm["device"]);
    auto strides = hintsOf(tm.value("strides", Json::array()));
    if (meta.shape && strides) meta.memoryFormat = pt2json::memoryFormatOf(*meta.shape, *strides);
  }

  // Which of a user input's dimensions are symbolic, by their expressions.
  void noteInputDims(const std::string& name) {
    std::vector<std::string> dims;
    if (tensorValues_->contains(name))
      for (const Json& s : (*tensorValues_)[name].value("sizes", Json::array()))
        dims.push_back(s.is_object() && s.contains("as_expr") ? pt2json::str(s["as_expr"], "expr_str") : "");
    out_.program.shapes.inputDims.push_back(dims);
  }

  void readInputs(const Json& signature) {
    const Json& graphInputs = pt2json::at(program_["graph_module"]["graph"], "inputs", "graph");
    const Json& specs = pt2json::at(signature, "input_specs", "signature");
    if (specs.size() != graphInputs.size())
      fail(fmt::format("the signature names {} inputs but the graph has {}; export it again", specs.size(),
                       graphInputs.size()));
    std::vector<std::pair<std::string, std::string>> attrs;  // placeholder name, fqn
    for (const Json& spec : specs) {
      const auto [kind, body] = pt2json::unionOf(spec, "an input spec");
      if (kind == "user_input") {
        const auto [argKind, arg] = pt2json::unionOf(pt2json::at(body, "arg", "user_input"), "a user input");
        if (argKind != "as_tensor")
          fail("user input of kind " + argKind + " (a number or symbol, not a tensor): ptopt reads programs "
               "whose inputs are tensors; export with those values fixed");
        const std::string name = pt2json::str(arg, "name");
        Value* v = graph_->addInput(c10::TensorType::get(), name);
        setMeta(v, name);
        noteInputDims(name);
        values_[name] = v;
      } else if (kind == "parameter" || kind == "buffer" || kind == "tensor_constant") {
        const std::string name = pt2json::str(pt2json::at(body, "arg", kind), "name");
        const std::string fqn = pt2json::str(body, kind == "parameter" ? "parameter_name"
                                                   : kind == "buffer"  ? "buffer_name"
                                                                       : "tensor_constant_name");
        // Non-persistent buffers are stored with the constants.
        const bool persistent = kind == "parameter" || (kind == "buffer" && body.value("persistent", true));
        const auto& table = persistent ? weights_ : constants_;
        auto it = table.find(fqn);
        if (it == table.end())
          fail("the program uses " + kind + " " + fqn + " but the archive stores no tensor for it; the archive "
               "is incomplete: save it again with torch.export.save");
        out_.model.constants->set(fqn, it->second);
        (kind == "parameter" ? out_.program.parameters : out_.program.buffers).push_back(fqn);
        attrs.emplace_back(name, fqn);
      } else if (kind == "custom_obj") {
        fail("input " + pt2json::str(pt2json::at(body, "arg", kind), "name") +
             " is a custom object (torch.ScriptObject); ptopt reads programs over tensors only");
      } else if (kind == "token") {
        fail("the program threads effect tokens (it calls ops with side effects); ptopt reads functional "
             "programs only");
      } else {
        fail("input spec of kind '" + kind + "' (a constant input): ptopt reads programs whose user inputs are "
             "tensors; export with those values fixed");
      }
    }
    for (const auto& [name, fqn] : attrs) {
      Node* n = graph_->createGetAttr(fqn, c10::TensorType::get());
      Builder(graph_->block()).insert(n);
      n->output()->setName(name);
      setMeta(n->output(), name);
      values_[name] = n->output();
    }
  }

  Value* valueNamed(const std::string& name, const std::string& node) const {
    auto it = values_.find(name);
    if (it == values_.end()) fail("node " + node + " reads %" + name + ", which nothing defines; export it again");
    return it->second;
  }

  // A tensor list argument: a prim::ListConstruct in front of the node.
  // `optional`: the items are optional tensors (as_optional_tensors);
  // `formal` typed Tensor?[] makes the list one of optional tensors even
  // when every item is given (`index.Tensor`'s indices as as_tensors).
  Value* tensorList(const Json& items, bool optional, const std::string& node, const c10::Argument& formal) {
    std::vector<Arg> args;
    for (const Json& item : items) {
      if (!optional) {
        args.emplace_back(valueNamed(pt2json::str(item, "name"), node));
        continue;
      }
      const auto [kind, body] = pt2json::unionOf(item, "an optional tensor");
      if (kind == "as_none") args.emplace_back(Literal(NoneLiteral{}));
      else args.emplace_back(valueNamed(pt2json::str(body, "name"), node));
    }
    const c10::TypePtr listed = formal.type()->kind() == c10::TypeKind::OptionalType
                                    ? formal.type()->containedTypes()[0] : formal.type();
    const bool optionalItems = optional || (listed->kind() == c10::TypeKind::ListType &&
                                            listed->containedTypes()[0]->kind() == c10::TypeKind::OptionalType);
    const c10::TypePtr type = optionalItems
                                  ? c10::ListType::create(c10::OptionalType::create(c10::TensorType::get()))
                                  : c10::ListType::ofTensors();
    return Builder(graph_->block()).call("prim::ListConstruct", std::move(args), type);
  }

  // A list literal for a list argument of another element type (`Scalar?[]`
  // given as ints): a prim::ListConstruct of that type, as TorchScript
  // spells it, so that the schema still matches.
  Arg typedLiteral(const Literal& literal, const c10::Argument& formal) {
    c10::TypePtr type = formal.type();
    if (type->kind() == c10::TypeKind::OptionalType) type = type->containedTypes()[0];
    if (type->kind() != c10::TypeKind::ListType || literal.isNone()) return literal;
    const c10::TypeKind element = type->containedTypes()[0]->kind();
    std::vector<Arg> items;
    if (literal.is<std::vector<int64_t>>()) {
      if (element == c10::TypeKind::IntType) return literal;
      for (int64_t v : literal.as<std::vector<int64_t>>()) items.emplace_back(Literal(v));
    } else if (literal.is<std::vector<double>>()) {
      if (element == c10::TypeKind::FloatType) return literal;
      for (double v : literal.as<std::vector<double>>()) items.emplace_back(Literal(v));
    } else if (literal.is<std::vector<bool>>()) {
      if (element == c10::TypeKind::BoolType) return literal;
      for (bool v : literal.as<std::vector<bool>>()) items.emplace_back(Literal(v));
    } else {
      return literal;
    }
    return Builder(graph_->block()).call("prim::ListConstruct", std::move(items), type);
  }

  // A SymIntArgument: an int value of the graph (as_name) or a number.
  Arg symInt(const Json& body, const std::string& node) {
    const auto [kind, b] = pt2json::unionOf(body, "a symbolic int of " + node);
    if (kind == "as_name") return valueNamed(b.get<std::string>(), node);
    if (kind == "as_int") return Literal(b.get<int64_t>());
    fail("node " + node + " passes a symbolic int of kind " + kind + ", which ptopt does not read");
  }

  Arg argument(const Json& arg, const c10::Argument& formal, const std::string& node) {
    const auto [kind, body] = pt2json::unionOf(arg, "an argument of " + node);
    if (kind == "as_tensor") return valueNamed(pt2json::str(body, "name"), node);
    if (kind == "as_tensors") return tensorList(body, false, node, formal);
    if (kind == "as_optional_tensors") return tensorList(body, true, node, formal);
    if (kind == "as_optional_tensor") {
      const auto [k, b] = pt2json::unionOf(body, "an optional tensor");
      if (k == "as_none") return Literal(NoneLiteral{});
      return valueNamed(pt2json::str(b, "name"), node);
    }
    if (auto literal = pt2json::literalOf(kind, body, formal.type())) return typedLiteral(*literal, formal);
    if (kind == "as_sym_int") return symInt(body, node);
    if (kind == "as_sym_ints") {
      std::vector<Arg> items;
      for (const Json& item : body) items.push_back(symInt(item, node));
      return Builder(graph_->block()).call("prim::ListConstruct", std::move(items), c10::ListType::ofInts());
    }
    if (kind == "as_sym_float" || kind == "as_sym_bool" || kind == "as_sym_floats" || kind == "as_sym_bools")
      fail("node " + node + " takes a symbolic " + (kind.find("float") != std::string::npos ? "float" : "boolean") +
           " (" + formal.name() + "): ptopt reads dynamic programs whose symbolic values are sizes; export "
           "with that dimension static");
    if (kind == "as_graph")
      fail("node " + node + " is a higher-order op with a subgraph (torch.cond, while_loop, map): ptopt "
           "reads programs without control flow; export the branch you deploy");
    if (kind == "as_custom_obj")
      fail("node " + node + " takes a custom object (torch.ScriptObject); ptopt reads programs over tensors");
    fail("node " + node + " has an argument " + formal.name() + " of kind " + kind + ", which ptopt does not "
         "read; please report it with the model");
  }

  // Python's int arithmetic on sizes (`_operator.mul(s, 4)`), as the
  // TorchScript int op `op` that computes it.
  void readSizeArithmetic(const Json& node, const std::string& op, const std::string& target,
                          const std::string& name) {
    std::vector<Arg> args;
    for (const Json& input : pt2json::at(node, "inputs", name)) {
      const auto [kind, body] = pt2json::unionOf(pt2json::at(input, "arg", name), "an argument of " + name);
      if (kind == "as_sym_int") args.push_back(symInt(body, name));
      else if (kind == "as_int") args.emplace_back(Literal(body.get<int64_t>()));
      else fail("node " + name + " computes " + target + " of a " + kind + "; ptopt reads size arithmetic on ints");
    }
    const Json& outputs = pt2json::at(node, "outputs", name);
    const auto [kind, body] = outputs.size() == 1 ? pt2json::unionOf(outputs[0], "an output of " + name)
                                                  : std::pair<std::string, const Json&>{"", outputs};
    if (kind != "as_sym_int" || !body.contains("as_name"))
      fail("node " + name + " (" + target + ") does not return one symbolic int; ptopt reads size arithmetic on ints");
    Value* v = Builder(graph_->block()).call(op, std::move(args), c10::IntType::get());
    v->setName(body["as_name"].get<std::string>());
    values_[v->name()] = v;
  }

  void readNode(const Json& node) {
    const std::string target = pt2json::str(node, "target");
    const std::string name = node.value("name", target);
    if (auto op = pt2json::sizeOpOfTarget(target)) return readSizeArithmetic(node, *op, target, name);
    const auto op = pt2json::operatorOf(target);
    if (!op) {
      if (target.rfind("torch.ops.higher_order.", 0) == 0)
        fail("node " + name + " calls " + target + ", a higher-order op (control flow or a wrapped "
             "subgraph); ptopt reads programs without control flow: export the branch you deploy");
      if (target.rfind("_operator.", 0) == 0 || target.rfind("torch.sym_", 0) == 0 ||
          target.rfind("math.", 0) == 0)
        fail("node " + name + " computes " + target + " on symbolic values: ptopt reads the size arithmetic "
             "*, +, -, //, %, max and min; export with that dimension static");
      fail("node " + name + " calls " + target + ", which is not a torch.ops operator; ptopt reads programs of "
           "registered operators");
    }
    const auto& [qualified, given] = *op;
    std::string overload = given;
    const c10::FunctionSchema* schema = findSchema(qualified, overload);
    if (!schema)
      fail("node " + name + " calls " + target + ", which is not registered in this process: load the "
           "library that defines it (--load-ops) or export without it");
    std::set<std::string> numbers;  // Tensor arguments given a number
    for (const Json& input : pt2json::at(node, "inputs", name)) {
      const std::string argName = pt2json::str(input, "name");
      const auto [kind, body] = pt2json::unionOf(pt2json::at(input, "arg", argName), "an argument of " + name);
      (void)body;
      for (const auto& f : schema->arguments())
        if (f.name() == argName && f.type()->kind() == c10::TypeKind::TensorType &&
            (kind == "as_int" || kind == "as_float" || kind == "as_bool"))
          numbers.insert(argName);
    }
    if (!numbers.empty()) {
      const c10::FunctionSchema* scalar = scalarOverload(qualified, *schema, numbers);
      if (!scalar)
        fail("node " + name + " passes a number for a Tensor argument of " + target + " and the op has no "
             "Scalar overload to take it; please report it with the model");
      schema = scalar;
      overload = scalar->overload_name();
    }
    const auto& formals = schema->arguments();
    std::vector<std::optional<Arg>> args(formals.size());
    for (const Json& input : pt2json::at(node, "inputs", name)) {
      const std::string argName = pt2json::str(input, "name");
      auto it = std::find_if(formals.begin(), formals.end(), [&](const c10::Argument& a) { return a.name() == argName; });
      if (it == formals.end())
        fail("node " + name + " passes " + argName + ", which " + target + " does not take here (this torch's "
             "schema differs from the one that exported it); export it again with this torch");
      args[it - formals.begin()] = argument(pt2json::at(input, "arg", argName), *it, name);
    }
    std::vector<Arg> ordered;
    for (size_t i = 0; i < formals.size(); ++i) {
      if (args[i]) {
        ordered.push_back(*args[i]);
        continue;
      }
      const auto& d = formals[i].default_value();
      std::optional<Literal> literal = d ? Literal::fromIValue(*d, formals[i].type()) : std::nullopt;
      if (!literal)
        fail("node " + name + " leaves out " + formals[i].name() + " of " + target + ", which has no default; "
             "export it again with this torch");
      ordered.push_back(*literal);
    }
    std::vector<c10::TypePtr> types;
    for (const auto& r : schema->returns()) types.push_back(r.type());
    Node* n = Builder(graph_->block()).callNode(qualified + (overload.empty() ? "" : "." + overload),
                                                std::move(ordered), types);
    setProvenanceFrom(n, node);
    const Json& outputs = pt2json::at(node, "outputs", name);
    if (outputs.size() != types.size())
      fail(fmt::format("node {} has {} outputs but {} returns {}; export it again with this torch", name,
                       outputs.size(), target, types.size()));
    for (size_t i = 0; i < outputs.size(); ++i) bindOutput(n, i, outputs[i], name);
  }

  void bindOutput(Node* n, size_t i, const Json& out, const std::string& node) {
    const auto [kind, body] = pt2json::unionOf(out, "an output of " + node);
    Value* v = n->output(i);
    if (kind == "as_tensor") {
      const std::string name = pt2json::str(body, "name");
      v->setName(name);
      setMeta(v, name);
      values_[name] = v;
    } else if (kind == "as_tensors") {
      std::vector<c10::TypePtr> types(body.size(), c10::TensorType::get());
      Node* unpack = Builder(graph_->block()).callNode("prim::ListUnpack", {v}, types);
      for (size_t k = 0; k < body.size(); ++k) {
        const std::string name = pt2json::str(body[k], "name");
        unpack->output(k)->setName(name);
        setMeta(unpack->output(k), name);
        values_[name] = unpack->output(k);
      }
    } else if (kind == "as_none") {
      // An output the program never reads.
    } else if (kind == "as_sym_int" && body.contains("as_name")) {
      // A size the graph computes at run time (sym_size of a dynamic dimension).
      v->setName(body["as_name"].get<std::string>());
      values_[v->name()] = v;
    } else if (kind == "as_sym_int" || kind == "as_int") {
      fail("node " + node + " returns a size (" + n->qualifiedTarget() + ") the program does not name; "
           "please report it with the model");
    } else {
      fail("node " + node + " returns a value of kind " + kind + ", which ptopt does not read");
    }
  }

  // The node's Python source line and module path, for messages and drawings.
  static void setProvenanceFrom(Node* n, const Json& node) {
    const Json meta = node.value("metadata", Json::object());
    const std::string trace = meta.value("stack_trace", std::string());
    // The last `File "x.py", line N` of the trace: the user's own line.
    size_t at = trace.rfind("File \"");
    if (at != std::string::npos) {
      const size_t end = trace.find('"', at + 6);
      const size_t line = trace.find("line ", end);
      if (end != std::string::npos && line != std::string::npos) {
        size_t stop = line + 5;
        while (stop < trace.size() && std::isdigit(static_cast<unsigned char>(trace[stop]))) ++stop;
        n->setSourceLocation(trace.substr(at + 6, end - at - 6) + ":" + trace.substr(line + 5, stop - line - 5));
      }
    }
    // nn_module_stack: "key,path,type;key,path,type": the innermost path.
    const std::string stack = meta.value("nn_module_stack", std::string());
    const size_t last = stack.rfind(';');
    const std::string entry = stack.substr(last == std::string::npos ? 0 : last + 1);
    const size_t a = entry.find(','), b = entry.rfind(',');
    if (a != std::string::npos && b > a) n->setScope(entry.substr(a + 1, b - a - 1));
  }

  void readOutputs(const Json& graph, const Json& signature) {
    for (const Json& spec : pt2json::at(signature, "output_specs", "signature")) {
      const auto [kind, body] = pt2json::unionOf(spec, "an output spec");
      if (kind == "user_output") continue;
      if (kind == "buffer_mutation")
        fail("the program writes buffer " + body.value("buffer_name", std::string("?")) + " in place (a "
             "BatchNorm in training mode, or a cache): export the model in eval mode, model.eval()");
      fail("the program's output spec '" + kind + "' (it mutates an input or parameter, or returns a loss "
           "or gradient): ptopt reads inference programs; export the model in eval mode");
    }
    std::vector<Arg> outs;
    for (const Json& out : pt2json::at(graph, "outputs", "graph")) {
      const auto [kind, body] = pt2json::unionOf(out, "an output");
      if (kind == "as_tensor") outs.emplace_back(valueNamed(pt2json::str(body, "name"), "output"));
      else if (auto literal = pt2json::literalOf(kind, body, nullptr)) outs.emplace_back(*literal);
      else fail("the program returns a value of kind " + kind + ", which ptopt does not read");
    }
    Node* output = graph_->block()->outputNode();
    if (outs.size() == 1 && pt2json::isLeafSpec(out_.program.outSpec)) {
      output->addArg(outs[0]);
      return;
    }
    std::vector<c10::TypePtr> types;
    for (const Arg& a : outs) types.push_back(a.isValue() ? a.value()->type() : a.literal().type());
    Value* tuple = Builder(graph_->block()).call("prim::TupleConstruct", outs, c10::TupleType::create(types));
    output->addArg(tuple);
  }

  const Pt2Archive& archive_;
  const Json& program_;
  Pt2ReadResult& out_;
  const Json* tensorValues_ = nullptr;
  std::map<std::string, at::Tensor> weights_, constants_;
  Graph* graph_ = nullptr;
  std::unordered_map<std::string, Value*> values_;
};

}  // namespace

namespace {

Pt2ReadResult parseArchive(const std::string& bytes, const std::string& where, int schemaMajor, bool checkCrc) {
  Pt2Archive archive(bytes, where, checkCrc);
  if (!archive.has("archive_format") || archive.text("archive_format", "") != "pt2")
    throw InputError("'" + where + "' is a zip archive but not a PT2 archive (no archive_format 'pt2'): save the "
                     "program with torch.export.save(ep, path)");
  // The one model the archive holds.
  std::vector<std::string> models;
  for (const std::string& r : archive.records())
    if (r.rfind("models/", 0) == 0 && r.size() > 12 && r.compare(r.size() - 5, 5, ".json") == 0)
      models.push_back(r.substr(7, r.size() - 12));
  if (models.empty())
    throw InputError("'" + where + "' holds no exported program (no models/*.json): it is an AOTInductor "
                     "package or an incomplete archive; give the file torch.export.save wrote");
  if (models.size() > 1)
    throw InputError("'" + where + "' holds " + std::to_string(models.size()) + " programs (" + models[0] + ", " +
                     models[1] + ", ...); ptopt optimizes one: save each with torch.export.save on its own");
  Pt2ReadResult out;
  out.program.modelName = models[0];
  const std::string samples = "data/sample_inputs/" + models[0] + ".pt";
  if (archive.has(samples)) out.program.sampleInputs = archive.text(samples, "");
  const Json program = archive.json("models/" + models[0] + ".json", "the exported program");
  const Json version = program.value("schema_version", Json::object());
  out.program.schemaVersion = {version.value("major", 0), version.value("minor", 0)};
  out.program.torchVersion = program.value("torch_version", std::string());
  const int major = schemaMajor;
  if (out.program.schemaVersion.first != major)
    throw InputError(fmt::format("'{}' was written with export schema {}.{} (torch {}); this ptopt reads schema "
                                 "{}.x (the torch it was built against, {}): export it again with that torch",
                                 where, out.program.schemaVersion.first, out.program.schemaVersion.second,
                                 out.program.torchVersion.empty() ? "?" : out.program.torchVersion, major,
                                 TORCH_VERSION));
  Pt2Importer(archive, program, out).run();
  return out;
}

}  // namespace

Pt2ReadResult readPt2(const std::string& bytes, const std::string& where, bool writtenHere) {
  if (!pt2Supported())
    throw InputError("'" + where + "' is a torch.export program (.pt2): " + pt2UnsupportedMessage("read"));
  return parsePt2Archive(bytes, where, pt2SchemaVersion().first, /*checkCrc=*/!writtenHere);
}

Pt2ReadResult parsePt2Archive(const std::string& bytes, const std::string& where, int schemaMajor, bool checkCrc) {
  try {
    return parseArchive(bytes, where, schemaMajor, checkCrc);
  } catch (const InputError&) {
    throw;
  } catch (const nlohmann::json::exception& e) {
    throw InputError("'" + where + "': the exported program is malformed (" + std::string(e.what()) +
                     "); export it again");
  } catch (const c10::Error& e) {
    throw InputError("'" + where + "' cannot be read: " + torchErrorMessage(e) + "; export it again");
  }
}

Pt2ReadResult readPt2File(const std::string& path) { return readPt2(readFileBytes(path), path); }

}  // namespace ptopt::ir
