// The Interpreter: runs IR graphs and single nodes through the real operators.
//
// Every call_function node with a registered operator runs that operator's
// boxed Operation on a Stack, exactly as TorchScript's own interpreter would
// (same kernels, same argument defaults, vararg ops get their input count), so
// running an imported graph reproduces the module's outputs bitwise. The
// schema-less prim ops TorchScript implements inside its interpreter are done
// here by hand: ListConstruct, ListUnpack, TupleConstruct (named tuples keep
// their type), TupleUnpack, TupleIndex, DictConstruct, unchecked_cast,
// Uninitialized, RaiseException (throws InterpreterError), isinstance,
// GetAttr on objects, and the control flow ops:
//   prim::If(cond)                      runs block0 when cond, else block1
//   prim::Loop(max_trip, cond, c...)    while (i < max_trip && cond) the body
//                                       runs with params (i, c...) and returns
//                                       (cond, c...); the node returns the
//                                       final carried values
// Other schema-less ops with a TorchScript implementation (prim::ConstantChunk,
// ...) run through the operator TorchScript creates for an equivalent node.
// An operator nobody implements is an InterpreterError naming it.
//
// Inline literals become IValues (Literal::toIValue), get_attr reads
// Graph::constants(). Runs have autograd off. Constants the graph may write in
// place (ir::MutationAnalysis, ir/mutation.h) are copied before the graph sees them, so running a
// graph never changes its constant table. Values are released after their
// last use. An Interpreter reads the graph's structure when it is built: do
// not edit the graph while one is in use (evaluateNode has no such cache).
#pragma once

#include "ir/ir.h"
#include "ir/mutation.h"  // MutationAnalysis: which constants a run may write

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace ptopt::ir {

// An operator failed, is unknown, or the model raised: the message names the
// node (its IR text and module scope) and carries the operator's own message
// without a C++ backtrace.
class InterpreterError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Called for every value the interpreter binds: graph inputs, get_attr
// results, node results, and block parameters (inside a loop once per
// iteration, so the last call holds the last iteration's value).
using ValueObserver = std::function<void(const Value& v, const c10::IValue& iv)>;

// Runs one call_function node: `run` calls its operator on `args` (one
// IValue per node argument) and returns its results. A NodeCall may change
// the arguments, call `run` again after a failure, or change the results
// (verify/fp64_reference.h runs a graph in float64 this way).
using NodeRun = std::function<std::vector<c10::IValue>(std::vector<c10::IValue> args)>;
using NodeCall = std::function<std::vector<c10::IValue>(const Node& n, std::vector<c10::IValue> args, const NodeRun& run)>;

struct InterpreterOptions {
  ValueObserver observer;
  // Every call_function node without nested blocks runs through it; none:
  // the operator is called directly.
  NodeCall call;
  // Copy the constants the graph may write in place before it sees them.
  bool protectConstants = true;
};

class Interpreter {
 public:
  explicit Interpreter(const Graph& graph, InterpreterOptions options = {});
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Runs the graph on `inputs` (one per placeholder, in order) and returns the
  // values of its output node. Throws InterpreterError.
  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs);
  // What the exported TorchScript method returns: the single output, or a
  // tuple of several.
  c10::IValue runMethod(std::vector<c10::IValue> inputs);

  // Runs one call_function node without nested blocks on `args`, one IValue
  // per node argument in order (literals too: argumentValue() converts them),
  // and returns its results. Looks the operator up on every call. Throws
  // InterpreterError (also for nodes with blocks).
  static std::vector<c10::IValue> evaluateNode(const Node& n, std::vector<c10::IValue> args);
  // The IValue a literal argument stands for (same as Literal::toIValue).
  static c10::IValue argumentValue(const Literal& l) { return l.toIValue(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The metadata shape propagation records for a tensor: dtype, shape, device,
// and memory format (contiguous_format when contiguous, else channels_last /
// channels_last_3d when the strides are those, else unset). An undefined
// tensor (what ATen returns for an output it did not compute, e.g. the
// attention weights of `_native_multi_head_attention` with need_weights=False)
// has no dtype, shape or device: its metadata is empty. A tensor that cannot
// be sized (a nested tensor, whose sizes() throws) has its dtype and device only.
TensorMeta metaOf(const at::Tensor& t);

// Calls the registered operator `name.overload` on `args` through the
// dispatcher and returns its first result (what passes that compute offline
// with an op, e.g. int8 weight packing, call). Throws c10::Error when no
// such operator is registered or it fails.
c10::IValue callOperator(const char* name, const char* overload, std::vector<c10::IValue> args);

}  // namespace ptopt::ir
