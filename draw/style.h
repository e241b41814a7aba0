// Colours and shapes of drawings: op families, dtype fills, and the colours
// of diff drawings (added green, changed yellow, removed dashed grey).
//
// Families: conv, linear/matmul, norm, activation, pooling, elementwise,
// cast/layout conversion (aten::to etc. with a dtype or a memory format,
// contiguous), shape/list, control flow (prim::If / prim::Loop),
// input/output, other.
#pragma once

#include "ir/ir.h"

#include <cstddef>
#include <optional>
#include <string>

namespace ptopt::draw {

enum class DotColorBy { Op, Dtype };
// Parses "op" / "dtype"; nullopt otherwise.
std::optional<DotColorBy> dotColorByFromName(const std::string& name);

enum class Family { Conv, Linear, Norm, Activation, Pool, Elementwise, Convert, Shape, Control, IO, Other };
Family familyOf(const ir::Node* n);
const char* familyFill(Family f);
const char* familyName(Family f);

// Casts: aten::to with a dtype, type_as, half/float/bfloat16/double.
bool isCastNode(const ir::Node* n);
// Layout conversions: contiguous, aten::to with a memory format (not preserve).
bool isLayoutConversion(const ir::Node* n);

const char* dtypeFill(std::optional<c10::ScalarType> t);
// The first output dtype shape propagation recorded.
std::optional<c10::ScalarType> outputDtype(const ir::Node* n);

// Background of a module-scope box, darker with depth.
const char* scopeFill(size_t depth);

// A node's state in a diff drawing.
enum class Status { Same, Added, Changed, Removed };

inline constexpr const char* kAddedFill = "#c8efc8";
inline constexpr const char* kAddedLine = "#2e8b3a";
inline constexpr const char* kChangedFill = "#fff0a0";
inline constexpr const char* kChangedLine = "#b8860b";
inline constexpr const char* kRemovedLine = "#9a9a9a";
inline constexpr const char* kRemovedText = "#8a8a8a";

}  // namespace ptopt::draw
