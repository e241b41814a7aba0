// The JSON of torch.export's serialized ExportedProgram
// (torch/_export/serde/schema.py), the pieces ptopt's .pt2 reader and
// writer share: the enums (ScalarType, MemoryFormat, Layout as the schema
// numbers them, not as c10 does), tagged unions (`{"as_tensor": {...}}`),
// sizes as SymInts, floats whose infinities are the strings "Infinity",
// "-Infinity" and "NaN", and operator targets (`torch.ops.aten.add.Tensor`).
// Errors are ir::InputError naming the field.
#pragma once

#include "ir/literal.h"

#include <ATen/core/jit_type.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ptopt::ir::pt2json {

using Json = nlohmann::json;

inline constexpr int kStridedLayout = 7;

// `j[key]`, or InputError "... has no KEY (in WHERE)".
const Json& at(const Json& j, const char* key, const std::string& where);
std::string str(const Json& j, const char* key);
// The one (kind, body) of a tagged union.
std::pair<std::string, const Json&> unionOf(const Json& j, const std::string& what);

c10::ScalarType scalarType(int schemaEnum, const std::string& where);
int scalarTypeEnum(c10::ScalarType t);
c10::MemoryFormat memoryFormat(int schemaEnum);
int memoryFormatEnum(c10::MemoryFormat f);
c10::Layout layout(int schemaEnum);
int layoutEnum(c10::Layout l);
c10::Device device(const Json& j);
Json deviceJson(const c10::Device& d);
double number(const Json& j);
Json numberJson(double d);

// A list of SymInts that are all concrete (`{"as_int": n}`); InputError
// naming `what` for a symbolic one. maybe...: nullopt instead.
std::vector<int64_t> concreteInts(const Json& list, const std::string& what);
int64_t concreteInt(const Json& symInt, const std::string& what);
std::optional<std::vector<int64_t>> maybeConcreteInts(const Json& list);
Json symInts(const std::vector<int64_t>& v);

// contiguous / channels_last / channels_last_3d when the strides are those;
// nullopt otherwise.
std::optional<c10::MemoryFormat> memoryFormatOf(const std::vector<int64_t>& sizes,
                                                const std::vector<int64_t>& strides);

// A literal argument (as_int, as_floats, as_scalar_type, ...; a symbolic
// size with a concrete value too); nullopt for other kinds. `hint`: the
// schema argument's type.
std::optional<Literal> literalOf(const std::string& kind, const Json& body, const c10::TypePtr& hint);
// The argument JSON of a literal.
Json literalJson(const Literal& l);

// `torch.ops.aten.add.Tensor` -> (`aten::add`, `Tensor`); `.default` -> "".
std::optional<std::pair<std::string, std::string>> operatorOf(const std::string& target);
std::string targetOf(const std::string& qualified, const std::string& overload);

// Python's int arithmetic on sizes as a dynamic program spells it
// (`_operator.mul`, `torch.sym_max`) and the TorchScript int op that
// computes it (`aten::mul.int`), in both directions; nullopt for others.
std::optional<std::string> sizeOpOfTarget(const std::string& pythonTarget);
std::optional<std::string> targetOfSizeOp(const std::string& qualifiedOp);

// Whether a pytree spec (TreeSpec JSON text, `[1, {...}]`) is a single leaf.
// An empty spec counts as one.
bool isLeafSpec(const std::string& spec);
// The specs of a flat call: (t0, t1, ...), {} in; one leaf or a tuple out.
std::string flatInSpec(size_t inputs);
std::string flatOutSpec(size_t outputs, bool tuple);

}  // namespace ptopt::ir::pt2json
