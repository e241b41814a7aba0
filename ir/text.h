// The IR text form: what tests, --print-after-all, rule files and error
// messages show. print -> parse -> print gives identical text.
//
//   graph(%x : Tensor, %n : int):
//     %conv1.weight : Tensor = get_attr["conv1.weight"]
//     %y : Tensor{float32, [1, 8, 4, 4], channels_last, cpu} = aten::conv2d(%x, %conv1.weight, None, [1, 1], [0, 0], [1, 1], 1)
//     %z : Tensor = prim::If(%c)
//       block0():
//         output(%y)
//       block1(%i : int):
//         output(%x)
//     output(%z)
//
// Placeholders are the graph's parameter list; `get_attr["name"]` names a
// constant; every other node is a call_function written as
// `target[.overload][attr=value, ...](args)`; `output(...)` ends each block.
// Nested blocks are indented two spaces under their node. Value metadata, when
// known, follows the type in braces. Lines starting with `#` are comments.
#pragma once

#include "ir/ir.h"

#include <map>
#include <memory>
#include <stdexcept>
#include <string>

namespace ptopt::ir {

std::string printGraph(const Graph& g);
std::string printNode(const Node& n);  // one line, without nested blocks
std::string printType(const c10::TypePtr& t);

// A parse error with a 1-based line and column and the offending line.
class ParseError : public std::runtime_error {
 public:
  ParseError(const std::string& msg, size_t line, size_t column, const std::string& lineText);
  size_t line() const { return line_; }
  size_t column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  size_t line_, column_;
  std::string message_;
};

struct ParseOptions {
  // Constants referenced by get_attr nodes (optional: a graph parsed without
  // them has the structure but no data).
  std::shared_ptr<ConstantTable> constants;
  // Named types (NamedTuples, classes) that type annotations may refer to.
  std::map<std::string, c10::TypePtr> namedTypes;
  // When false, unknown operators are accepted without a schema (patterns).
  bool requireKnownOperators = true;
};

std::unique_ptr<Graph> parseGraph(const std::string& text, const ParseOptions& options = {});
// Parses a type annotation (`Tensor`, `List[int]`, `Optional[Tensor]`, ...).
c10::TypePtr parseType(const std::string& text,
                       const std::map<std::string, c10::TypePtr>& namedTypes = {});

}  // namespace ptopt::ir
