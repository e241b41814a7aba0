#include "ir/literal.h"

#include <ATen/core/jit_type.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace ptopt::ir {
namespace {

struct DtypeEntry {
  c10::ScalarType type;
  const char* name;
};
constexpr DtypeEntry kDtypes[] = {
    {c10::ScalarType::Float, "float32"},   {c10::ScalarType::Double, "float64"},
    {c10::ScalarType::Half, "float16"},    {c10::ScalarType::BFloat16, "bfloat16"},
    {c10::ScalarType::Long, "int64"},      {c10::ScalarType::Int, "int32"},
    {c10::ScalarType::Short, "int16"},     {c10::ScalarType::Char, "int8"},
    {c10::ScalarType::Byte, "uint8"},      {c10::ScalarType::Bool, "bool"},
    {c10::ScalarType::ComplexFloat, "complex64"},
    {c10::ScalarType::ComplexDouble, "complex128"},
    {c10::ScalarType::ComplexHalf, "complex32"},
    {c10::ScalarType::QInt8, "qint8"},     {c10::ScalarType::QUInt8, "quint8"},
    {c10::ScalarType::QInt32, "qint32"},
};

struct MemoryFormatEntry {
  c10::MemoryFormat format;
  const char* name;
};
constexpr MemoryFormatEntry kMemoryFormats[] = {
    {c10::MemoryFormat::Contiguous, "contiguous_format"},
    {c10::MemoryFormat::Preserve, "preserve_format"},
    {c10::MemoryFormat::ChannelsLast, "channels_last"},
    {c10::MemoryFormat::ChannelsLast3d, "channels_last_3d"},
};

struct LayoutEntry {
  c10::Layout layout;
  const char* name;
};
constexpr LayoutEntry kLayouts[] = {
    {c10::kStrided, "strided"},
    {c10::kSparse, "sparse_coo"},
    {c10::kMkldnn, "_mkldnn"},
};

// Unwraps Optional[T] so a schema type `ScalarType?` hints like `ScalarType`.
c10::TypePtr unwrapOptional(const c10::TypePtr& t) {
  if (t && t->kind() == c10::TypeKind::OptionalType)
    return t->expectRef<c10::OptionalType>().getElementType();
  return t;
}

template <typename T, typename F>
std::string joinList(const std::vector<T>& xs, F f) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) out += ", ";
    out += f(xs[i]);
  }
  return out + "]";
}

}  // namespace

std::string dtypeName(c10::ScalarType t) {
  for (const auto& e : kDtypes)
    if (e.type == t) return e.name;
  return c10::toString(t);
}
std::optional<c10::ScalarType> dtypeFromName(const std::string& name) {
  for (const auto& e : kDtypes)
    if (name == e.name) return e.type;
  return std::nullopt;
}
std::string memoryFormatName(c10::MemoryFormat f) {
  for (const auto& e : kMemoryFormats)
    if (e.format == f) return e.name;
  return "unknown_format";
}
std::optional<c10::MemoryFormat> memoryFormatFromName(const std::string& name) {
  for (const auto& e : kMemoryFormats)
    if (name == e.name) return e.format;
  return std::nullopt;
}
std::string layoutName(c10::Layout l) {
  for (const auto& e : kLayouts)
    if (e.layout == l) return e.name;
  return "unknown_layout";
}
std::optional<c10::Layout> layoutFromName(const std::string& name) {
  for (const auto& e : kLayouts)
    if (name == e.name) return e.layout;
  return std::nullopt;
}

std::string formatDouble(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quoteString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

std::string Literal::str() const {
  struct Printer {
    std::string operator()(const NoneLiteral&) const { return "None"; }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return formatDouble(d); }
    std::string operator()(const std::string& s) const { return quoteString(s); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return v.empty() ? "int[]" : joinList(v, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<double>& v) const {
      return v.empty() ? "float[]" : joinList(v, formatDouble);
    }
    std::string operator()(const std::vector<bool>& v) const {
      if (v.empty()) return "bool[]";
      std::vector<int64_t> asInts(v.begin(), v.end());
      return joinList(asInts, [](int64_t b) { return std::string(b ? "True" : "False"); });
    }
    std::string operator()(const std::vector<std::string>& v) const {
      return v.empty() ? "str[]" : joinList(v, quoteString);
    }
    std::string operator()(c10::ScalarType t) const { return "torch." + dtypeName(t); }
    std::string operator()(c10::MemoryFormat f) const { return "torch." + memoryFormatName(f); }
    std::string operator()(c10::Layout l) const { return "torch." + layoutName(l); }
    std::string operator()(const c10::Device& d) const { return "device(\"" + d.str() + "\")"; }
  };
  return std::visit(Printer{}, value_);
}

c10::IValue Literal::toIValue() const {
  struct Converter {
    c10::IValue operator()(const NoneLiteral&) const { return c10::IValue(); }
    c10::IValue operator()(bool b) const { return b; }
    c10::IValue operator()(int64_t i) const { return i; }
    c10::IValue operator()(double d) const { return d; }
    c10::IValue operator()(const std::string& s) const { return s; }
    c10::IValue operator()(const std::vector<int64_t>& v) const { return v; }
    c10::IValue operator()(const std::vector<double>& v) const { return v; }
    c10::IValue operator()(const std::vector<bool>& v) const {
      c10::List<bool> l;
      for (bool b : v) l.push_back(b);
      return l;
    }
    c10::IValue operator()(const std::vector<std::string>& v) const {
      c10::List<std::string> l;
      for (const auto& s : v) l.push_back(s);
      return l;
    }
    // TorchScript stores these enums as plain ints.
    c10::IValue operator()(c10::ScalarType t) const { return static_cast<int64_t>(t); }
    c10::IValue operator()(c10::MemoryFormat f) const { return static_cast<int64_t>(f); }
    c10::IValue operator()(c10::Layout l) const { return static_cast<int64_t>(l); }
    c10::IValue operator()(const c10::Device& d) const { return d; }
  };
  return std::visit(Converter{}, value_);
}

c10::TypePtr Literal::type() const {
  struct Typer {
    c10::TypePtr operator()(const NoneLiteral&) const { return c10::NoneType::get(); }
    c10::TypePtr operator()(bool) const { return c10::BoolType::get(); }
    c10::TypePtr operator()(int64_t) const { return c10::IntType::get(); }
    c10::TypePtr operator()(double) const { return c10::FloatType::get(); }
    c10::TypePtr operator()(const std::string&) const { return c10::StringType::get(); }
    c10::TypePtr operator()(const std::vector<int64_t>&) const { return c10::ListType::ofInts(); }
    c10::TypePtr operator()(const std::vector<double>&) const { return c10::ListType::ofFloats(); }
    c10::TypePtr operator()(const std::vector<bool>&) const { return c10::ListType::ofBools(); }
    c10::TypePtr operator()(const std::vector<std::string>&) const { return c10::ListType::ofStrings(); }
    c10::TypePtr operator()(c10::ScalarType) const { return c10::IntType::get(); }
    c10::TypePtr operator()(c10::MemoryFormat) const { return c10::IntType::get(); }
    c10::TypePtr operator()(c10::Layout) const { return c10::IntType::get(); }
    c10::TypePtr operator()(const c10::Device&) const { return c10::DeviceObjType::get(); }
  };
  return std::visit(Typer{}, value_);
}

std::optional<Literal> Literal::fromIValue(const c10::IValue& v, const c10::TypePtr& hint) {
  if (v.isNone()) return Literal(NoneLiteral{});
  if (v.isBool()) return Literal(v.toBool());
  if (v.isInt()) {
    const int64_t i = v.toInt();
    const auto h = unwrapOptional(hint);
    if (h && h->kind() == c10::TypeKind::ScalarTypeType)
      return Literal(static_cast<c10::ScalarType>(i));
    if (h && h->kind() == c10::TypeKind::MemoryFormatType)
      return Literal(static_cast<c10::MemoryFormat>(i));
    if (h && h->kind() == c10::TypeKind::LayoutType)
      return Literal(static_cast<c10::Layout>(i));
    return Literal(i);
  }
  if (v.isDouble()) return Literal(v.toDouble());
  if (v.isString()) return Literal(v.toStringRef());
  if (v.isDevice()) return Literal(v.toDevice());
  if (v.isIntList()) return Literal(v.toIntVector());
  if (v.isDoubleList()) return Literal(v.toDoubleVector());
  if (v.isBoolList()) {
    std::vector<bool> out;
    for (bool b : v.toBoolList()) out.push_back(b);
    return Literal(std::move(out));
  }
  if (v.isList() && v.type()->containedType(0)->kind() == c10::TypeKind::StringType) {
    std::vector<std::string> out;
    for (const auto& s : v.toListRef()) out.push_back(s.toStringRef());
    return Literal(std::move(out));
  }
  return std::nullopt;
}

}  // namespace ptopt::ir
