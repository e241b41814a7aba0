// Inline literal arguments of the ptopt IR (FX style).
//
// A node argument is either a Value or a Literal. Literals are the scalar and
// list constants TorchScript keeps in prim::Constant nodes (None, bool, int,
// float, string, typed lists) plus the enum-like constants that TorchScript
// encodes as ints but whose meaning the schema knows (dtype, memory format,
// layout) and devices. Export pools literals back into prim::Constant nodes.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ptopt::ir {

struct NoneLiteral {
  bool operator==(const NoneLiteral&) const { return true; }
};

// Empty lists keep their element type, so the variant has one list per kind.
using LiteralValue = std::variant<NoneLiteral, bool, int64_t, double, std::string,
                                  std::vector<int64_t>, std::vector<double>,
                                  std::vector<bool>, std::vector<std::string>,
                                  c10::ScalarType, c10::MemoryFormat, c10::Layout,
                                  c10::Device>;

class Literal {
 public:
  Literal() = default;
  template <typename T,
            typename = std::enable_if_t<std::is_constructible_v<LiteralValue, T> &&
                                        !std::is_same_v<std::decay_t<T>, Literal>>>
  Literal(T&& v) : value_(std::forward<T>(v)) {}  // NOLINT: implicit on purpose
  Literal(const char* s) : value_(std::string(s)) {}
  Literal(int v) : value_(static_cast<int64_t>(v)) {}

  const LiteralValue& value() const { return value_; }
  template <typename T>
  bool is() const { return std::holds_alternative<T>(value_); }
  template <typename T>
  const T& as() const { return std::get<T>(value_); }
  bool isNone() const { return is<NoneLiteral>(); }

  bool operator==(const Literal& o) const { return value_ == o.value_; }
  bool operator!=(const Literal& o) const { return !(*this == o); }

  // The text form (see text.h): None, True, 3, 1.5, "s", [1, 2], int[],
  // torch.float32, torch.channels_last, torch.strided, device("cpu").
  std::string str() const;
  // The TorchScript constant this literal exports to (dtype -> int etc.).
  c10::IValue toIValue() const;
  // The TorchScript type of toIValue().
  c10::TypePtr type() const;

  // Converts a TorchScript constant; nullopt when it is not a literal kind
  // (tensors, tuples, objects). `hint` is the schema argument's real type and
  // turns ints into dtype / memory format / layout literals.
  static std::optional<Literal> fromIValue(const c10::IValue& v,
                                           const c10::TypePtr& hint = nullptr);

 private:
  LiteralValue value_;
};

// Python-style names: torch.float32 <-> c10::ScalarType::Float.
std::string dtypeName(c10::ScalarType t);
std::optional<c10::ScalarType> dtypeFromName(const std::string& name);
std::string memoryFormatName(c10::MemoryFormat f);
std::optional<c10::MemoryFormat> memoryFormatFromName(const std::string& name);
std::string layoutName(c10::Layout l);
std::optional<c10::Layout> layoutFromName(const std::string& name);
// Shortest decimal text that reads back as the same double; always has a '.',
// an exponent, or is inf/nan, so it never reads back as an int.
std::string formatDouble(double d);
std::string quoteString(const std::string& s);

}  // namespace ptopt::ir
