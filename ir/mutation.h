// The one alias and mutation analysis: which values a graph may write in
// place (through aliases), which operators are opaque or may write every
// argument, and which single uses write what they read. The interpreter
// (which constants to copy before a run), cse and canonicalize (what may be
// merged or forwarded), const-fold, channels-last and cast (what may be
// changed) and the folds (isWrittenAnywhere in rewriters/constants.h) all ask
// it.
#pragma once

#include "ir/ir.h"

#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ptopt::ir {

// A call_function outside aten:: and prim:: (torchvision::nms, an operator a
// project registers with TORCH_LIBRARY): ptopt knows only its schema. What
// every pass does with one is written in ir/dead_code.h.
bool isOpaque(const Node* n);
// An opaque operator whose schema's alias annotations cannot be trusted (it
// was not registered FROM_SCHEMA or PURE_FUNCTION, or it has no schema): it
// may write and alias every mutable argument.
bool opaqueMayWriteAll(const Node* n);

// True for types whose values can be changed in place or alias others
// (tensors, lists, dicts, objects, tuples holding those). int, float, bool,
// str, None, device, dtype, layout and memory format are never written.
bool isMutableType(const c10::TypePtr& t);
inline bool isMutableValue(const Value* v) { return v && isMutableType(v->type()); }

// The direct, per-use rule (no aliases followed): the use may write the value
// it reads when the user is an opaque operator without trusted annotations,
// a schema-less operator not known to only read (only ListConstruct,
// TupleConstruct, DictConstruct, If, Loop and unchecked_cast are), an
// argument annotated as written (`Tensor(a!)`), or a vararg position of a
// mutable operator. Cheap: for checks on one value (a weight to fold).
bool useMayWrite(const Use& u);
// Some use of `v` may write it (useMayWrite).
bool anyUseMayWrite(const Value* v);

// Which values of a graph may be written in place, through aliases. Values
// fall into classes (union-find) that over-approximate aliasing, in two
// partitions built in one walk, for two kinds of question:
//
// Write classes (mayBeWritten, writtenConstants: what the interpreter copies
// before a run, what const-fold, channels-last and cast may change). Every
// value takes part. A schema'd operator ties its annotated arguments and
// results (`Tensor(a)`, `Tensor(a!)`, `t(*)`); prim::If ties each result to
// the branches' outputs at its position, prim::Loop each carried value to
// its initial value, body parameter and body output; container prims
// (ListConstruct, TupleUnpack, ...) tie all their operands and results,
// except a TupleConstruct that only the graph returns (never read inside the
// graph, its elements do not alias through it); operators whose aliasing is
// unknown (CONSERVATIVE registrations, vararg schemas, unknown schema-less
// operators) tie everything they touch. A class is written when a value is
// passed to a writing argument (`(a!)`) or to an operator of unknown aliasing.
//
// Merge classes (mayBeMutated, mayEscape: what cse and canonicalize may
// merge or forward). Mutable values only (never int, float, bool, str, ...).
// A schema'd operator ties its annotated arguments and results, its
// container arguments and results, and its varargs; dropout and type_as
// (which may return their input despite a fresh-result schema) tie input and
// result; schema-less operators, and opaque ones without trusted
// annotations, tie everything they touch, block parameters and outputs
// included; all containers of mutable elements (List[Tensor], tuples, dicts,
// objects) share one class, since elements can be taken out of them
// anywhere. A class is mutated when a value is passed to a writing argument,
// to a side-effecting operator of unknown aliasing, or compared by identity
// (aten::__is__); it is reshaped (mayBeReshaped) when the write may change
// its geometry or the comparison tell a view from its base; it escapes when
// a value is an output of the top-level block.
class MutationAnalysis {
 public:
  explicit MutationAnalysis(const Graph& g);
  // `v` or a value of its write class may be written in place. False for
  // values created after the analysis.
  bool mayBeWritten(const Value* v) const;
  // `v`'s merge class may be written or compared by identity: replacing `v`
  // by an equal value could be seen (cse, canonicalize). False for immutable
  // types.
  bool mayBeMutated(const Value* v) const;
  // `v`'s merge class may have its geometry changed in place (resize_,
  // set_, set_data, as_strided_, the in-place view ops such as unsqueeze_,
  // an out= argument, which an operator may resize; a write by an operator
  // outside aten or of unknown aliasing) or be compared by identity
  // (__is__, _is_view, _base): a full view of a tensor may then
  // not stand for the tensor itself (canonicalize's no-op views). Writes of
  // data alone (add_, relu_, copy_) do not count: a view with the tensor's
  // sizes, strides and offset sees them as the tensor does. False for
  // immutable types.
  bool mayBeReshaped(const Value* v) const;
  // `v` or a value of its merge class is a graph output.
  bool mayEscape(const Value* v) const;
  // The constants (by name) whose get_attr values may be written.
  const std::set<std::string>& writtenConstants() const { return writtenConstants_; }

 private:
  size_t id(const Value* v);
  size_t find(size_t i) const;
  void unite(size_t a, size_t b);
  size_t classOf(const Value* v) const;  // npos when v was never seen
  void visit(const Node* n);
  void joinAll(const Node* n, bool write);

  std::unordered_map<const Value*, size_t> ids_;
  mutable std::vector<size_t> parent_;
  std::vector<const Value*> written_, observed_, reshaped_, escaping_;
  std::unordered_set<size_t> writtenRoots_, observedRoots_, reshapedRoots_, escapingRoots_;
  size_t containers_ = 0;  // the class of containers with mutable elements
  std::set<std::string> writtenConstants_;
};

}  // namespace ptopt::ir
