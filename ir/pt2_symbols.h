// The symbolic sizes of a torch.export program exported with
// `dynamic_shapes=` (a batch or sequence length that varies), as ptopt reads
// and writes them.
//
// A program names each free size by a symbol (`s77`), gives its range
// (`range_constraints`: 1 <= s77 <= 64) and the value it was exported at
// (the hint), and writes every size that depends on one as a sympy
// expression in srepr form: `Symbol('s77', positive=True, integer=True)`,
// `Mul(Integer(4), Symbol('s77', ...))`. ptopt's IR computes sizes at run
// time (sym_size and int arithmetic, as TorchScript does), so passes need
// nothing symbolic; only the writer does: each size of a tensor value and
// each int value it writes needs its expression. It finds it by running the
// graph at several sizes within the ranges (sample points) and taking the
// expression whose values match at every point: one the input program
// wrote (parsed and evaluated here), else `a*s + b` in one symbol, else a
// product of symbols times a constant. A size no such expression matches is
// refused, naming the value.
//
// Expressions are parsed from sympy's srepr (Symbol, Integer, Add, Mul, Pow,
// FloorDiv, PythonMod, Mod, Max, Min, CleanDiv); anything else is kept as
// text and only not offered as a candidate.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ptopt::ir {

// One size at the sample points: the value at each point, in order.
using SizeTrace = std::vector<int64_t>;
using SymbolValues = std::map<std::string, int64_t>;

class SymExpr {
 public:
  // nullopt: not srepr this parser knows.
  static std::optional<SymExpr> parse(const std::string& srepr);
  // The value at `at` (every symbol bound), or nullopt where it is not an
  // integer or a symbol is unbound.
  std::optional<int64_t> evaluate(const SymbolValues& at) const;
  const std::string& text() const { return text_; }
  std::set<std::string> symbols() const;

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

// What a dynamic program says of its sizes (empty for a static one).
struct Pt2Shapes {
  struct Range {
    int64_t min = 0;
    std::optional<int64_t> max;  // nullopt: unbounded
  };
  std::map<std::string, Range> ranges;          // range_constraints, by symbol
  std::map<std::string, int64_t> hints;         // the value each symbol was exported at
  std::map<std::string, std::string> symbolText;  // s77 -> Symbol('s77', positive=True, integer=True)
  // Per user input, per dimension: the srepr of a symbolic size ("" static).
  std::vector<std::vector<std::string>> inputDims;
  // Every distinct expression the program wrote (sizes, strides, int values),
  // first seen first: the writer's candidates.
  std::vector<std::string> expressions;

  bool dynamic() const { return !ranges.empty() || !hints.empty(); }
  // Notes an expression the program wrote; a bare symbol's hint and text too.
  void noteExpression(const std::string& srepr, std::optional<int64_t> hint);

  // The symbols' values for inputs of these sizes (from the dimensions that
  // are a bare symbol), the hints for the rest.
  SymbolValues valuesFor(const std::vector<std::vector<int64_t>>& inputSizes) const;
  // The points the writer and verification run at: `base` first, then each
  // symbol moved on its own (twice) and all together, within their ranges.
  std::vector<SymbolValues> samplePoints(const SymbolValues& base) const;
  // `base` with every symbol moved to its first (`which` 0) or second other
  // value: the sizes verification also runs at.
  SymbolValues allMoved(const SymbolValues& base, size_t which) const;
  std::vector<int64_t> movedValues(const std::string& symbol, int64_t hint) const;
  // The inputs' sizes at up to two other points than `given`'s, every
  // symbol moved (allMoved 0 and 1): where a dynamic program is verified
  // besides the sizes given.
  std::vector<std::vector<std::vector<int64_t>>> otherInputSizes(
      const std::vector<std::vector<int64_t>>& given) const;
  // Each user input's sizes at a point (`hintSizes`: its sizes at the hints,
  // for the static dimensions); nullopt where a dimension's expression does
  // not evaluate.
  std::optional<std::vector<std::vector<int64_t>>> inputSizesAt(
      const SymbolValues& point, const std::vector<std::vector<int64_t>>& hintSizes) const;
};

// The expression of a size from its values at the sample points: the
// program's own expressions, evaluated once at every point, then the
// generated forms (see the top).
class SizeExpressions {
 public:
  SizeExpressions(const Pt2Shapes& shapes, std::vector<SymbolValues> points);
  // nullopt: the values are all equal (a static size: `*constant` is it) or
  // no expression matches (`*constant` is nullopt).
  std::optional<std::string> match(const SizeTrace& trace, std::optional<int64_t>* constant) const;
  const std::vector<SymbolValues>& points() const { return points_; }

 private:
  const Pt2Shapes& shapes_;
  std::vector<SymbolValues> points_;
  std::map<SizeTrace, std::string> known_;  // the program's expressions by their values
};

}  // namespace ptopt::ir
