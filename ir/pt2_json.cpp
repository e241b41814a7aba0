// The JSON pieces of torch.export's schema (see pt2_json.h).
#include "ir/pt2_json.h"

#include "ir/model.h"  // InputError

#include <torch/version.h>

#include <cmath>
#include <limits>

namespace ptopt::ir::pt2json {

const Json& at(const Json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key))
    throw InputError("the exported program's " + where + " has no '" + key + "'; export it again");
  return j[key];
}

std::string str(const Json& j, const char* key) {
  const Json& v = at(j, key, "entry");
  if (!v.is_string()) throw InputError(std::string("the exported program's '") + key + "' is not a string");
  return v.get<std::string>();
}

std::pair<std::string, const Json&> unionOf(const Json& j, const std::string& what) {
  if (!j.is_object() || j.size() != 1)
    throw InputError("the exported program has " + what + " that is not a tagged union; export it again");
  return {j.begin().key(), j.begin().value()};
}

namespace {

// (schema enum, c10 type), as torch/_export/serde/schema.py numbers them.
const std::vector<std::pair<int, c10::ScalarType>>& scalarTypes() {
  static const std::vector<std::pair<int, c10::ScalarType>> table = {
      {1, c10::kByte},          {2, c10::kChar},          {3, c10::kShort},     {4, c10::kInt},
      {5, c10::kLong},          {6, c10::kHalf},          {7, c10::kFloat},     {8, c10::kDouble},
      {9, c10::kComplexHalf},   {10, c10::kComplexFloat}, {11, c10::kComplexDouble},
      {12, c10::kBool},         {13, c10::kBFloat16},
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
      {28, c10::kUInt16},       {34, c10::kUInt32},       {35, c10::kUInt64},
      {29, c10::ScalarType::Float8_e4m3fn}, {30, c10::ScalarType::Float8_e5m2},
      {31, c10::ScalarType::Float8_e4m3fnuz}, {32, c10::ScalarType::Float8_e5m2fnuz},
#endif
  };
  return table;
}

}  // namespace

c10::ScalarType scalarType(int schemaEnum, const std::string& where) {
  for (const auto& [e, t] : scalarTypes())
    if (e == schemaEnum) return t;
  throw InputError("'" + where + "' has a dtype (" + std::to_string(schemaEnum) +
                   " in torch.export's numbering) ptopt does not know");
}

int scalarTypeEnum(c10::ScalarType t) {
  for (const auto& [e, s] : scalarTypes())
    if (s == t) return e;
  throw std::invalid_argument(std::string("dtype ") + c10::toString(t) + " has no torch.export number");
}

c10::MemoryFormat memoryFormat(int e) {
  switch (e) {
    case 2: return c10::MemoryFormat::ChannelsLast;
    case 3: return c10::MemoryFormat::ChannelsLast3d;
    case 4: return c10::MemoryFormat::Preserve;
    default: return c10::MemoryFormat::Contiguous;
  }
}

int memoryFormatEnum(c10::MemoryFormat f) {
  switch (f) {
    case c10::MemoryFormat::ChannelsLast: return 2;
    case c10::MemoryFormat::ChannelsLast3d: return 3;
    case c10::MemoryFormat::Preserve: return 4;
    default: return 1;
  }
}

c10::Layout layout(int e) {
  switch (e) {
    case 1: return c10::kSparse;
    case 2: return c10::kSparseCsr;
    case 3: return c10::kSparseCsc;
    case 4: return c10::kSparseBsr;
    case 5: return c10::kSparseBsc;
    case 6: return c10::kMkldnn;
    default: return c10::kStrided;
  }
}

int layoutEnum(c10::Layout l) {
  switch (l) {
    case c10::kSparse: return 1;
    case c10::kSparseCsr: return 2;
    case c10::kSparseCsc: return 3;
    case c10::kSparseBsr: return 4;
    case c10::kSparseBsc: return 5;
    case c10::kMkldnn: return 6;
    default: return kStridedLayout;
  }
}

c10::Device device(const Json& j) {
  const std::string type = j.value("type", std::string("cpu"));
  const Json index = j.value("index", Json());
  try {
    c10::Device d(type);
    if (index.is_number_integer()) d.set_index(static_cast<c10::DeviceIndex>(index.get<int>()));
    return d;
  } catch (const std::exception&) {
    throw InputError("the exported program names a device '" + type + "' this torch does not know");
  }
}

Json deviceJson(const c10::Device& d) {
  Json j = {{"type", c10::DeviceTypeName(d.type(), /*lower_case=*/true)}, {"index", nullptr}};
  if (d.has_index()) j["index"] = d.index();
  return j;
}

double number(const Json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  throw InputError("the exported program has a float that is neither a number nor Infinity/NaN: " + j.dump());
}

Json numberJson(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return d;
}

std::optional<std::vector<int64_t>> maybeConcreteInts(const Json& list) {
  if (!list.is_array()) return std::nullopt;
  std::vector<int64_t> out;
  for (const Json& s : list) {
    if (!s.is_object() || !s.contains("as_int")) return std::nullopt;
    out.push_back(s["as_int"].get<int64_t>());
  }
  return out;
}

std::vector<int64_t> concreteInts(const Json& list, const std::string& what) {
  auto v = maybeConcreteInts(list);
  if (!v)
    throw InputError(what + " are symbolic: the program was exported with dynamic shapes; ptopt reads programs "
                     "with static shapes: export without dynamic_shapes");
  return *v;
}

int64_t concreteInt(const Json& s, const std::string& what) {
  if (!s.is_object() || !s.contains("as_int"))
    throw InputError(what + " is symbolic: the program was exported with dynamic shapes; export without "
                     "dynamic_shapes");
  return s["as_int"].get<int64_t>();
}

Json symInts(const std::vector<int64_t>& v) {
  Json out = Json::array();
  for (int64_t x : v) out.push_back({{"as_int", x}});
  return out;
}

std::optional<c10::MemoryFormat> memoryFormatOf(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  if (sizes.size() != strides.size()) return std::nullopt;
  auto matches = [&](const std::vector<size_t>& order) {  // innermost first
    int64_t expected = 1;
    for (size_t d : order) {
      if (sizes[d] != 1 && strides[d] != expected) return false;
      expected *= std::max<int64_t>(sizes[d], 1);
    }
    return true;
  };
  std::vector<size_t> contiguous(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) contiguous[i] = sizes.size() - 1 - i;
  if (matches(contiguous)) return c10::MemoryFormat::Contiguous;
  if (sizes.size() == 4 && matches({1, 3, 2, 0})) return c10::MemoryFormat::ChannelsLast;
  if (sizes.size() == 5 && matches({1, 4, 3, 2, 0})) return c10::MemoryFormat::ChannelsLast3d;
  return std::nullopt;
}

std::optional<Literal> literalOf(const std::string& kind, const Json& body, const c10::TypePtr& hint) {
  (void)hint;
  if (kind == "as_none") return Literal(NoneLiteral{});
  if (kind == "as_int") return Literal(body.get<int64_t>());
  if (kind == "as_float") return Literal(number(body));
  if (kind == "as_bool") return Literal(body.get<bool>());
  if (kind == "as_string") return Literal(body.get<std::string>());
  if (kind == "as_ints") return Literal(body.get<std::vector<int64_t>>());
  if (kind == "as_bools") return Literal(body.get<std::vector<bool>>());
  if (kind == "as_strings") return Literal(body.get<std::vector<std::string>>());
  if (kind == "as_floats") {
    std::vector<double> v;
    for (const Json& x : body) v.push_back(number(x));
    return Literal(std::move(v));
  }
  if (kind == "as_scalar_type") return Literal(scalarType(body.get<int>(), "an argument"));
  if (kind == "as_memory_format") return Literal(memoryFormat(body.get<int>()));
  if (kind == "as_layout") return Literal(layout(body.get<int>()));
  if (kind == "as_device") return Literal(device(body));
  // Symbolic arguments that are concrete after all.
  if (kind == "as_sym_int" && body.contains("as_int")) return Literal(body["as_int"].get<int64_t>());
  if (kind == "as_sym_float" && body.contains("as_float")) return Literal(number(body["as_float"]));
  if (kind == "as_sym_bool" && body.contains("as_bool")) return Literal(body["as_bool"].get<bool>());
  if (kind == "as_sym_ints") {
    if (auto v = maybeConcreteInts(body)) return Literal(*v);
  }
  return std::nullopt;
}

Json literalJson(const Literal& l) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, NoneLiteral>) return {{"as_none", true}};
        else if constexpr (std::is_same_v<T, bool>) return {{"as_bool", v}};
        else if constexpr (std::is_same_v<T, int64_t>) return {{"as_int", v}};
        else if constexpr (std::is_same_v<T, double>) return {{"as_float", numberJson(v)}};
        else if constexpr (std::is_same_v<T, std::string>) return {{"as_string", v}};
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return {{"as_ints", v}};
        else if constexpr (std::is_same_v<T, std::vector<bool>>) return {{"as_bools", v}};
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) return {{"as_strings", v}};
        else if constexpr (std::is_same_v<T, std::vector<double>>) {
          Json a = Json::array();
          for (double d : v) a.push_back(numberJson(d));
          return {{"as_floats", a}};
        } else if constexpr (std::is_same_v<T, c10::ScalarType>) return {{"as_scalar_type", scalarTypeEnum(v)}};
        else if constexpr (std::is_same_v<T, c10::MemoryFormat>) return {{"as_memory_format", memoryFormatEnum(v)}};
        else if constexpr (std::is_same_v<T, c10::Layout>) return {{"as_layout", layoutEnum(v)}};
        else return {{"as_device", deviceJson(v)}};
      },
      l.value());
}

std::optional<std::pair<std::string, std::string>> operatorOf(const std::string& target) {
  const std::string prefix = "torch.ops.";
  if (target.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string rest = target.substr(prefix.size());
  const size_t a = rest.find('.');
  const size_t b = rest.rfind('.');
  if (a == std::string::npos || b == a) return std::nullopt;
  const std::string ns = rest.substr(0, a);
  if (ns == "higher_order") return std::nullopt;
  std::string overload = rest.substr(b + 1);
  if (overload == "default") overload.clear();
  return std::make_pair(ns + "::" + rest.substr(a + 1, b - a - 1), overload);
}

std::string targetOf(const std::string& qualified, const std::string& overload) {
  const size_t colons = qualified.find("::");
  return "torch.ops." + qualified.substr(0, colons) + "." + qualified.substr(colons + 2) + "." +
         (overload.empty() ? "default" : overload);
}

namespace {
const std::vector<std::pair<std::string, std::string>>& sizeArithmetic() {
  static const std::vector<std::pair<std::string, std::string>> ops = {
      {"_operator.mul", "aten::mul.int"},       {"_operator.add", "aten::add.int"},
      {"_operator.sub", "aten::sub.int"},       {"_operator.floordiv", "aten::floordiv.int"},
      {"_operator.mod", "aten::remainder.int"}, {"_operator.neg", "aten::neg.int"},
      {"torch.sym_max", "prim::max.int"},       {"torch.sym_min", "prim::min.int"}};
  return ops;
}
}  // namespace

std::optional<std::string> sizeOpOfTarget(const std::string& pythonTarget) {
  for (const auto& [python, op] : sizeArithmetic())
    if (python == pythonTarget) return op;
  return std::nullopt;
}

std::optional<std::string> targetOfSizeOp(const std::string& qualifiedOp) {
  for (const auto& [python, op] : sizeArithmetic())
    if (op == qualifiedOp) return python;
  return std::nullopt;
}

bool isLeafSpec(const std::string& spec) {
  if (spec.empty()) return true;
  try {
    const Json j = Json::parse(spec);
    return j.is_array() && j.size() == 2 && j[1].is_object() && j[1].value("type", Json()).is_null();
  } catch (const std::exception&) {
    return false;
  }
}

namespace {
Json leafSpec() { return {{"type", nullptr}, {"context", nullptr}, {"children_spec", Json::array()}}; }
Json tupleSpec(size_t n) {
  Json children = Json::array();
  for (size_t i = 0; i < n; ++i) children.push_back(leafSpec());
  return {{"type", "builtins.tuple"}, {"context", "null"}, {"children_spec", children}};
}
}  // namespace

std::string flatInSpec(size_t inputs) {
  const Json kwargs = {{"type", "builtins.dict"}, {"context", "[]"}, {"children_spec", Json::array()}};
  const Json top = {{"type", "builtins.tuple"}, {"context", "null"}, {"children_spec", {tupleSpec(inputs), kwargs}}};
  return Json::array({1, top}).dump();
}

std::string flatOutSpec(size_t outputs, bool tuple) {
  return Json::array({1, tuple ? tupleSpec(outputs) : leafSpec()}).dump();
}

}  // namespace ptopt::ir::pt2json
