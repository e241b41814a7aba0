#include "verify/inputs.h"

#include "ir/literal.h"
#include "ir/model.h"
#include "ir/op_views.h"
#include "rewriters/constants.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in <fmt/format.h> only before fmt 11)
#include <nlohmann/json.hpp>
#include <torch/script.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/import_read.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include <sstream>
#include <stdexcept>

namespace ptopt::verify {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

bool looksLikeShape(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789, ") == std::string::npos;
}

}  // namespace

std::string InputSpec::str() const {
  std::string out = name.empty() ? "" : name + ":";
  switch (kind) {
    case Kind::Int: return out + "int:" + std::to_string(static_cast<int64_t>(scalar));
    case Kind::Float: return out + "float:" + ir::formatDouble(scalar);
    case Kind::Bool: return out + "bool:" + std::to_string(scalar != 0);
    case Kind::None: return out + "none";
    case Kind::Default: return out + "default(" + value.str() + ")";
    case Kind::Tensor: break;
  }
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  if (dtype != c10::ScalarType::Float) out += ":" + ir::dtypeName(dtype);
  return out;
}

InputSpec parseInputSpec(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("bad input shape '" + text + "': " + why +
                                 " (expected e.g. 1,3,224,224 or x:1,3,224,224 or 2,7:int64 or bias:none)");
  };
  InputSpec spec;
  std::vector<std::string> parts = split(text, ':');
  if (parts.empty()) throw bad("empty");
  // Scalars: [name:]int:3 / float:0.5 / bool:1
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& k = parts[i];
    if (k == "int" || k == "float" || k == "bool") {
      if (i + 2 != parts.size() || i > 1) throw bad("a scalar is written int:VALUE");
      spec.name = i == 1 ? parts[0] : "";
      spec.kind = k == "int" ? InputSpec::Kind::Int : k == "float" ? InputSpec::Kind::Float : InputSpec::Kind::Bool;
      const std::string& number = parts[i + 1];
      size_t used = 0;
      try {
        spec.scalar = std::stod(number, &used);
      } catch (const std::exception&) {  // invalid_argument, or out_of_range for 1e999
        throw bad("'" + number + "' is not a finite number");
      }
      if (used != number.size() || !std::isfinite(spec.scalar)) throw bad("'" + number + "' is not a finite number");
      // An int must be a whole number that fits int64 (str() prints it as one).
      if (spec.kind == InputSpec::Kind::Int &&
          (spec.scalar != std::trunc(spec.scalar) || std::fabs(spec.scalar) >= 9.2e18))
        throw bad("'" + number + "' is not a 64-bit integer");
      return spec;
    }
  }
  // None: [name:]none
  if (parts.size() <= 2 && (parts.back() == "none" || parts.back() == "None")) {
    spec.kind = InputSpec::Kind::None;
    spec.name = parts.size() == 2 ? parts[0] : "";
    return spec;
  }
  size_t shapeIdx = 0;
  if (!looksLikeShape(parts[0])) {
    spec.name = parts[0];
    shapeIdx = 1;
  }
  if (shapeIdx >= parts.size() || !looksLikeShape(parts[shapeIdx])) throw bad("no shape");
  int64_t elements = 1;
  for (const auto& item : split(parts[shapeIdx], ',')) {
    // Digits with optional spaces around them: "1, 3" but not "1 3".
    const size_t first = item.find_first_not_of(' '), last = item.find_last_not_of(' ');
    const std::string d = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (d.empty()) throw bad("empty dimension");
    if (d.find(' ') != std::string::npos) throw bad("'" + d + "' is not one number (a ',' missing?)");
    int64_t dim = 0;
    for (char c : d)
      if (__builtin_mul_overflow(dim, int64_t{10}, &dim) || __builtin_add_overflow(dim, int64_t(c - '0'), &dim))
        throw bad("dimension '" + d + "' is too large");
    if (__builtin_mul_overflow(elements, dim, &elements)) throw bad("the shape has more elements than fit in 64 bits");
    spec.shape.push_back(dim);
  }
  if (shapeIdx + 1 < parts.size()) {
    auto dt = ir::dtypeFromName(parts[shapeIdx + 1]);
    if (!dt) throw bad("unknown dtype '" + parts[shapeIdx + 1] + "' (use float32, float16, bfloat16, float64, int64, int32, uint8, bool...)");
    spec.dtype = *dt;
  }
  if (shapeIdx + 2 < parts.size()) throw bad("too many ':' parts");
  return spec;
}

InputSpec inputSpecFromJson(const nlohmann::json& j) {
  InputSpec spec;
  const std::string type = j.value("type", "tensor");
  spec.name = j.value("name", "");
  if (type == "tensor") {
    spec.shape = j.at("shape").get<std::vector<int64_t>>();
    auto dt = ir::dtypeFromName(j.value("dtype", "float32"));
    if (!dt) throw std::invalid_argument("unknown dtype in " + j.dump());
    spec.dtype = *dt;
    spec.low = j.value("low", int64_t{0});
    spec.high = j.value("high", int64_t{100});
  } else if (type == "int" || type == "float" || type == "bool") {
    spec.kind = type == "int" ? InputSpec::Kind::Int : type == "float" ? InputSpec::Kind::Float : InputSpec::Kind::Bool;
    spec.scalar = j.at("value").is_boolean() ? (j.at("value").get<bool>() ? 1.0 : 0.0) : j.at("value").get<double>();
  } else if (type == "none") {
    spec.kind = InputSpec::Kind::None;
  } else {
    throw std::invalid_argument("unknown input type '" + type + "'");
  }
  return spec;
}

void applyIntRange(std::vector<InputSpec>& specs, int64_t low, int64_t high) {
  for (auto& s : specs)
    if (s.kind == InputSpec::Kind::Tensor && !at::isFloatingType(s.dtype) && s.dtype != at::kBool) {
      s.low = low;
      s.high = high;
    }
}

std::pair<int64_t, int64_t> parseIntRange(const std::string& text) {
  auto parts = split(text, ',');
  try {
    if (parts.size() == 2) {
      size_t usedLo = 0, usedHi = 0;
      const int64_t lo = std::stoll(parts[0], &usedLo), hi = std::stoll(parts[1], &usedHi);
      if (usedLo == parts[0].size() && usedHi == parts[1].size() && hi > lo) return {lo, hi};
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("bad --int-range '" + text + "': expected LO,HI with HI > LO (values drawn from [LO, HI))");
}

namespace {

InputSet inputSetFromIValue(const c10::IValue& v) {
  InputSet set;
  if (v.isTuple() || v.isList()) {
    for (const auto& e : v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec()) {
      set.names.emplace_back();
      set.values.push_back(e);
    }
  } else if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict()) {
      set.names.push_back(e.key().isString() ? e.key().toStringRef() : "");
      set.values.push_back(e.value());
    }
  } else {
    set.names.emplace_back();
    set.values.push_back(v);
  }
  return set;
}

}  // namespace

InputSet loadInputsFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw std::invalid_argument("--inputs '" + path + "': no such file");
  std::string moduleError;
  try {
    torch::jit::Module m = torch::jit::load(path);
    InputSet set;
    for (const auto& attr : m.named_attributes(/*recurse=*/false)) {
      // `training` and TorchScript's own hook bookkeeping are not inputs.
      if (attr.name == "training" || attr.name.rfind("_", 0) == 0) continue;
      set.names.push_back(attr.name);
      set.values.push_back(attr.value);
    }
    if (set.values.empty())
      throw std::invalid_argument("--inputs '" + path + "': the TorchScript module holds no attributes; set one attribute per input");
    return set;
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    moduleError = ir::torchErrorMessage(e);
  }
  try {
    // torch.save's zip layout: <archive>/data.pkl with tensor storages in
    // <archive>/data/<key>.
    caffe2::serialize::PyTorchStreamReader reader(path);
    return inputSetFromIValue(torch::jit::readArchiveAndTensors("data", "", "data/", c10::nullopt, c10::nullopt,
                                                                c10::kCPU, reader));
  } catch (const std::exception& e) {
    const std::string msg = ir::torchErrorMessage(e);
    // LibTorch's unpickler lacks the single-item APPEND/SETITEM opcodes that
    // Python writes for one-element lists and dicts.
    if (msg.find("Unknown opcode for unpickling at 0x61") != std::string::npos ||
        msg.find("Unknown opcode for unpickling at 0x73") != std::string::npos)
      throw std::invalid_argument("--inputs '" + path +
                                  "': LibTorch cannot read a one-element list or dict saved by torch.save; save "
                                  "the tensor itself or a tuple: torch.save((x,), FILE)");
    throw std::invalid_argument(
        "--inputs '" + path + "' holds neither a torch.save'd tensor/list/tuple/dict nor a TorchScript module "
        "of input attributes (torch.load-style read: " + ir::torchErrorMessage(e) + "; TorchScript read: " +
        moduleError + "). Save inputs with torch.save([x, y], FILE) from Python");
  }
}

std::vector<c10::IValue> orderInputs(const InputSet& set, const std::vector<std::string>& modelInputNames) {
  std::vector<c10::IValue> ordered;
  for (const auto& name : modelInputNames) {
    auto it = std::find(set.names.begin(), set.names.end(), name);
    if (it == set.names.end()) return set.values;
    ordered.push_back(set.values[static_cast<size_t>(it - set.names.begin())]);
  }
  return ordered.size() == set.values.size() ? ordered : set.values;
}

std::vector<std::string> inputNames(const ir::Graph& forward) {
  std::vector<std::string> names;
  for (const ir::Value* v : forward.inputs()) {
    std::string n = v->name();
    const auto dot = n.rfind('.');
    if (dot != std::string::npos && dot + 1 < n.size() &&
        n.find_first_not_of("0123456789", dot + 1) == std::string::npos)
      n = n.substr(0, dot);
    names.push_back(n);
  }
  return names;
}

std::optional<ir::Literal> inputDefault(const ir::Value& input) {
  if (const ir::AttrValue* a = input.node()->attr("default"))
    if (const auto* lit = std::get_if<ir::Literal>(a)) return *lit;
  if (input.type() && input.type()->kind() == c10::TypeKind::OptionalType) return ir::Literal(ir::NoneLiteral{});
  return std::nullopt;
}

std::vector<std::string> optionalInputNames(const ir::Graph& forward) {
  const auto inputs = forward.inputs();
  const auto names = inputNames(forward);
  std::vector<std::string> out;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputDefault(*inputs[i])) out.push_back(names[i]);
  return out;
}

namespace {

// Where each of `given` goes among the model's inputs: by name when it has
// one, else the input after the previous one. `nameOf(k)` is given[k]'s name
// (empty: positional), `what(k)` how to mention it in messages.
std::vector<size_t> placeGiven(size_t count, const std::function<std::string(size_t)>& nameOf,
                               const std::function<std::string(size_t)>& what, const ir::Graph& forward,
                               const std::string& givenText) {
  const auto names = inputNames(forward);
  const std::string all = fmt::format("{}", fmt::join(names, ", "));
  std::vector<size_t> at(count);
  std::vector<int> by(names.size(), -1);
  size_t next = 0;
  for (size_t k = 0; k < count; ++k) {
    const std::string name = nameOf(k);
    size_t i = next;
    if (!name.empty()) {
      auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end())
        throw std::invalid_argument(
            fmt::format("{} names '{}', but the model has no input of that name (inputs: {})", what(k), name, all));
      i = static_cast<size_t>(it - names.begin());
    }
    if (i >= names.size())
      throw std::invalid_argument(
          fmt::format("the model takes {} input(s) ({}); {} (too many)", names.size(), all, givenText));
    if (by[i] >= 0)
      throw std::invalid_argument(fmt::format("input '{}' is given twice: by {} and by {} (inputs: {})", names[i],
                                              what(static_cast<size_t>(by[i])), what(k), all));
    by[i] = static_cast<int>(k);
    at[k] = i;
    next = i + 1;
  }
  return at;
}

// Every input that `at` (placeGiven's result) leaves out must have a default.
void requireLeftOutHaveDefaults(const std::vector<size_t>& at, const ir::Graph& forward, const std::string& givenText) {
  const auto names = inputNames(forward);
  std::vector<bool> given(names.size(), false);
  for (size_t i : at) given[i] = true;
  std::vector<std::string> missing;
  for (size_t i = 0; i < names.size(); ++i)
    if (!given[i] && !inputDefault(*forward.inputs()[i])) missing.push_back(names[i]);
  if (!missing.empty()) {
    const auto optional = optionalInputNames(forward);
    throw std::invalid_argument(fmt::format(
        "the model takes {} input(s) ({}); {}: missing {}{}", names.size(), fmt::join(names, ", "), givenText,
        fmt::join(missing, ", "),
        optional.empty() ? std::string() : fmt::format(" (optional inputs: {})", fmt::join(optional, ", "))));
  }
}

}  // namespace

std::vector<InputSpec> completeInputSpecs(const std::vector<InputSpec>& given, const ir::Graph& forward,
                                          const std::string& givenText) {
  const auto inputs = forward.inputs();
  const auto names = inputNames(forward);
  const auto at = placeGiven(
      given.size(), [&](size_t k) { return given[k].name; },
      [&](size_t k) { return "'" + given[k].str() + "'"; }, forward, givenText);
  std::vector<std::optional<InputSpec>> placed(inputs.size());
  for (size_t k = 0; k < given.size(); ++k) {
    const size_t i = at[k];
    const c10::TypePtr& type = inputs[i]->type();
    if (given[k].kind == InputSpec::Kind::None && type->kind() != c10::TypeKind::OptionalType &&
        type->kind() != c10::TypeKind::NoneType)
      throw std::invalid_argument(fmt::format("'{}': input '{}' is {}, not Optional: it cannot be None",
                                              given[k].str(), names[i], type->annotation_str()));
    const c10::TypePtr element =
        type->kind() == c10::TypeKind::OptionalType ? type->castRaw<c10::OptionalType>()->getElementType() : type;
    if (given[k].kind != InputSpec::Kind::None && !isBuildableInputType(element))
      throw std::invalid_argument(fmt::format(
          "'{}': input '{}' is {}, which ptopt cannot build from a shape; save the inputs from Python and pass "
          "--inputs FILE", given[k].str(), names[i], type->annotation_str()));
    placed[i] = given[k];
  }
  requireLeftOutHaveDefaults(at, forward, givenText);
  std::vector<InputSpec> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (placed[i]) {
      out.push_back(*placed[i]);
      continue;
    }
    InputSpec spec;
    spec.kind = InputSpec::Kind::Default;
    spec.name = names[i];
    spec.value = *inputDefault(*inputs[i]);  // checked by requireLeftOutHaveDefaults
    out.push_back(spec);
  }
  return out;
}

std::vector<c10::IValue> completeInputValues(const InputSet& set, const ir::Graph& forward,
                                             const std::string& givenText) {
  const auto inputs = forward.inputs();
  const auto names = inputNames(forward);
  // By name only when every value is named after an input (a dict saved
  // with the model's argument names); attribute holders may use any names.
  bool byName = !set.values.empty() && set.names.size() == set.values.size();
  for (const auto& n : set.names)
    byName = byName && std::find(names.begin(), names.end(), n) != names.end();
  const auto at = placeGiven(
      set.values.size(), [&](size_t k) { return byName ? set.names[k] : std::string(); },
      [&](size_t k) {
        return k >= set.names.size() || set.names[k].empty() ? fmt::format("value {}", k + 1)
                                                              : fmt::format("'{}'", set.names[k]);
      },
      forward, givenText);
  requireLeftOutHaveDefaults(at, forward, givenText);
  std::vector<std::optional<c10::IValue>> placed(inputs.size());
  for (size_t k = 0; k < set.values.size(); ++k) placed[at[k]] = set.values[k];
  std::vector<c10::IValue> out;
  for (size_t i = 0; i < inputs.size(); ++i)
    out.push_back(retypeInput(placed[i] ? *placed[i] : inputDefault(*inputs[i])->toIValue(), inputs[i]->type()));
  return out;
}

std::optional<std::vector<InputSpec>> recordedInputSpecs(const ir::Graph& forward) {
  std::vector<InputSpec> specs;
  for (const ir::Value* in : forward.inputs()) {
    const ir::TensorMeta& m = in->meta();
    if (!in->isTensor() || !m.dtype || !m.shape) return std::nullopt;
    InputSpec spec;
    spec.name = in->name();
    spec.shape = *m.shape;
    spec.dtype = *m.dtype;
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return std::nullopt;
  return specs;
}

std::optional<InferredInputs> inferInputSpecs(const ir::Graph& forward) {
  const auto inputs = forward.inputs();
  if (inputs.empty() || !inputs[0]->isTensor() || inputs[0]->uses().empty()) return std::nullopt;
  for (size_t i = 1; i < inputs.size(); ++i)
    if (!inputDefault(*inputs[i])) return std::nullopt;
  // The first user in program order.
  ir::Node* first = nullptr;
  forward.walk([&](ir::Node* n) {
    if (first) return;
    for (const auto& u : inputs[0]->uses())
      if (u.user == n) first = n;
  });
  if (!first) return std::nullopt;
  // The first op, read through its op view: a linear, or a conv with
  // literal transposed and groups, whose input is the model's input and
  // whose weight is a constant.
  const auto lin = ir::LinearOp::match(first);
  std::optional<ir::ConvOp> conv;
  if (!lin) conv = ir::ConvOp::match(first);
  if (!lin && !conv) return std::nullopt;
  if ((lin ? lin->input() : conv->input()) != inputs[0]) return std::nullopt;
  auto weight = rewriters::constantTensorArg(first, lin ? lin->weightIndex() : conv->weightIndex());
  if (!weight) return std::nullopt;
  InputSpec spec;
  std::string from;
  if (lin) {
    if (weight->dim() != 2) return std::nullopt;
    spec.shape = {1, weight->size(1)};
    from = fmt::format("the first op is a linear with in_features={}", weight->size(1));
  } else {
    if (weight->dim() < 3 || weight->dim() > 5) return std::nullopt;
    const int64_t channels = conv->transposed() ? weight->size(0) : weight->size(1) * conv->groups();
    const int64_t rank = weight->dim() - 2;
    spec.shape = rank == 1 ? std::vector<int64_t>{1, channels, 224}
                 : rank == 2 ? std::vector<int64_t>{1, channels, 224, 224}
                             : std::vector<int64_t>{1, channels, 16, 112, 112};
    from = fmt::format("the first op is {} with {} input channels", first->target(), channels);
  }
  spec.name = inputNames(forward)[0];
  InferredInputs out;
  out.specs = completeInputSpecs({spec}, forward, "");
  std::vector<std::string> defaults;
  for (size_t i = 1; i < out.specs.size(); ++i) defaults.push_back(out.specs[i].str());
  out.assumption = fmt::format("assumed input {} = {} ({}{}); give --input-shape to choose", spec.name,
                               fmt::join(spec.shape, ","), from,
                               defaults.empty() ? std::string()
                                                : fmt::format("; left at their defaults: {}", fmt::join(defaults, ", ")));
  return out;
}

c10::IValue retypeInput(const c10::IValue& value, const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::OptionalType:
      return value.isNone() ? value : retypeInput(value, type->castRaw<c10::OptionalType>()->getElementType());
    case c10::TypeKind::ListType: {
      if (!value.isList()) return value;
      const c10::TypePtr element = type->castRaw<c10::ListType>()->getElementType();
      c10::impl::GenericList out(element);
      for (const c10::IValue& e : value.toListRef()) out.push_back(retypeInput(e, element));
      return out;
    }
    case c10::TypeKind::DictType: {
      if (!value.isGenericDict()) return value;
      const auto* d = type->castRaw<c10::DictType>();
      c10::impl::GenericDict out(d->getKeyType(), d->getValueType());
      for (const auto& entry : value.toGenericDict())
        out.insert(retypeInput(entry.key(), d->getKeyType()), retypeInput(entry.value(), d->getValueType()));
      return out;
    }
    case c10::TypeKind::TupleType: {
      if (!value.isTuple()) return value;
      const auto& elements = value.toTupleRef().elements();
      const auto contained = type->containedTypes();
      if (elements.size() != contained.size()) return value;
      std::vector<c10::IValue> out;
      for (size_t i = 0; i < elements.size(); ++i) out.push_back(retypeInput(elements[i], contained[i]));
      return c10::ivalue::Tuple::create(std::move(out));
    }
    default:
      return value;
  }
}

bool isBuildableInputType(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
    case c10::TypeKind::IntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
      return true;
    default:
      return false;
  }
}

std::string pythonExample(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::TensorType: return "torch.rand(1, 3, 224, 224)";
    case c10::TypeKind::IntType: return "1";
    case c10::TypeKind::FloatType: return "1.0";
    case c10::TypeKind::BoolType: return "True";
    case c10::TypeKind::StringType: return "'text'";
    case c10::TypeKind::NoneType: return "None";
    case c10::TypeKind::OptionalType:
      return pythonExample(type->castRaw<c10::OptionalType>()->getElementType());  // or None
    case c10::TypeKind::ListType: {
      const auto element = type->castRaw<c10::ListType>()->getElementType();
      // Images for detection models are C x H x W, without a batch dimension.
      return "[" + (element->kind() == c10::TypeKind::TensorType ? std::string("torch.rand(3, 224, 224)")
                                                                  : pythonExample(element)) + "]";
    }
    case c10::TypeKind::TupleType: {
      std::vector<std::string> parts;
      for (const auto& e : type->containedTypes()) parts.push_back(pythonExample(e));
      return "(" + fmt::format("{}", fmt::join(parts, ", ")) + (parts.size() == 1 ? ",)" : ")");
    }
    case c10::TypeKind::DictType: {
      const auto* d = type->castRaw<c10::DictType>();
      return "{" + pythonExample(d->getKeyType()) + ": " + pythonExample(d->getValueType()) + "}";
    }
    default:
      return "<a " + type->annotation_str() + ">";
  }
}

std::vector<c10::IValue> makeInputs(const std::vector<InputSpec>& specs, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::vector<c10::IValue> out;
  for (const auto& s : specs) {
    switch (s.kind) {
      case InputSpec::Kind::Int: out.emplace_back(static_cast<int64_t>(s.scalar)); break;
      case InputSpec::Kind::Float: out.emplace_back(s.scalar); break;
      case InputSpec::Kind::Bool: out.emplace_back(s.scalar != 0); break;
      case InputSpec::Kind::None: out.emplace_back(); break;
      case InputSpec::Kind::Default: out.push_back(s.value.toIValue()); break;
      case InputSpec::Kind::Tensor:
        if (at::isFloatingType(s.dtype) || at::isComplexType(s.dtype))
          out.emplace_back(at::randn(s.shape, gen, at::TensorOptions().dtype(at::kFloat)).to(s.dtype));
        else if (s.dtype == at::kBool)
          out.emplace_back(at::randint(0, 2, s.shape, gen, at::TensorOptions().dtype(at::kLong)).to(at::kBool));
        else
          out.emplace_back(at::randint(s.low, s.high, s.shape, gen, at::TensorOptions().dtype(s.dtype)));
        break;
    }
  }
  return out;
}

std::vector<c10::IValue> cloneInputs(const std::vector<c10::IValue>& inputs) {
  std::vector<c10::IValue> out;
  for (const auto& v : inputs) out.push_back(v.isTensor() ? c10::IValue(v.toTensor().clone()) : v);
  return out;
}

}  // namespace ptopt::verify
