// Example inputs for running and verifying models.
//
// A spec describes one model input: a tensor (`1,3,224,224`, optionally
// named `x:1,3,224,224`, optionally typed `2,7:int64`), a scalar, or None
// (`none`, `bias:none`). Tensors are drawn from a seeded generator: float
// types from a standard normal, integer types uniformly from [low, high).
//
// Inputs with a default (`bias: Optional[Tensor] = None`, `scale: int = 2`)
// may be left out: completeInputSpecs / completeInputValues fill them in
// with the default, so every run (reference, candidate, shape-prop) gets
// the full argument list the stock module would build itself.
#pragma once

#include "ir/ir.h"

#include <ATen/core/ivalue.h>
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

namespace ptopt::verify {

struct InputSpec {
  // None: an explicit None. Default: the input's declared default (`value`),
  // for an input that was left out; never parsed, only made by planning.
  enum class Kind { Tensor, Int, Float, Bool, None, Default };
  Kind kind = Kind::Tensor;
  std::string name;               // optional; when given, the input it is for
  std::vector<int64_t> shape;     // tensors
  c10::ScalarType dtype = c10::ScalarType::Float;
  int64_t low = 0, high = 100;    // integer tensors: values in [low, high)
  double scalar = 0;              // scalars
  ir::Literal value;              // Default

  // The --input-shape text (`x:1,3,224,224`, `bias:none`); a Default prints
  // as `scale:default(2)`, for messages only.
  std::string str() const;
};

// Parses `1,3,224,224`, `name:1,3,224,224`, `2,7:int64`, `name:2,7:int64`,
// `int:3`, `float:0.5`, `bool:1`, `none`, `name:none`. Throws
// std::invalid_argument naming the problem.
InputSpec parseInputSpec(const std::string& text);
// The fixture manifest form: {"type":"tensor","shape":[..],"dtype":"int64",
// "low":0,"high":100} or {"type":"int","value":3}.
InputSpec inputSpecFromJson(const nlohmann::json& j);

// Sets [low, high) of every integer tensor spec (`--int-range lo,hi`).
void applyIntRange(std::vector<InputSpec>& specs, int64_t low, int64_t high);
// Parses `lo,hi` (hi > lo); throws std::invalid_argument.
std::pair<int64_t, int64_t> parseIntRange(const std::string& text);

// Inputs saved from Python (`--inputs FILE`). Two formats:
//  - `torch.save(obj, FILE)` where obj is a tensor, a tuple or list of
//    inputs in order, or a dict from input name to value (LibTorch's
//    unpickler cannot read one-element lists and dicts: save a tensor or a
//    1-tuple `(x,)` for a one-input model);
//  - a TorchScript module whose root attributes (parameters, buffers or
//    plain attributes, in the order they were set) are the inputs, named
//    after the attributes: the usual way to hand tensors to C++.
// Values may be any IValue (tensors, lists of tensors, tuples, None...).
struct InputSet {
  std::vector<std::string> names;  // may be empty strings
  std::vector<c10::IValue> values;
};
// Throws std::invalid_argument naming the file and what is wrong with it.
InputSet loadInputsFile(const std::string& path);
// Orders a named set by the model's input names when every name matches
// one; otherwise keeps the file's order.
std::vector<c10::IValue> orderInputs(const InputSet& set, const std::vector<std::string>& modelInputNames);

// The model's input names for messages (`x`, not the IR's `x.1`).
std::vector<std::string> inputNames(const ir::Graph& forward);

// The value a left-out input takes: its declared default (kept on the
// placeholder at import as the `default` attribute), or None for an
// Optional input without one; nullopt when the input must be given. A
// default that is not a literal (a tuple) is not kept and reads as none.
std::optional<ir::Literal> inputDefault(const ir::Value& input);
// The names of the inputs that may be left out, for messages.
std::vector<std::string> optionalInputNames(const ir::Graph& forward);

// Places `given` on the model's inputs and fills the rest with their
// defaults. A named spec goes to the input of that name, an unnamed one to
// the input after the previous spec (so `--input-shape x:.. --input-shape
// scale:int:3` skips `bias`). Throws std::invalid_argument for an unknown
// name, an input given twice, too many specs, None for an input that is not
// Optional, or a missing input (naming the missing ones and the optional
// ones); `givenText` says what was given ("--input-shape was given 1
// time(s)"). The result has one spec per input, in order; the defaults
// filled in are named after their inputs.
std::vector<InputSpec> completeInputSpecs(const std::vector<InputSpec>& given, const ir::Graph& forward,
                                          const std::string& givenText);
// The same for values loaded with loadInputsFile: by name when every name in
// the set is one of the model's inputs, else in the file's order; left-out
// inputs take their defaults; each value is retyped as its input's type
// (retypeInput). Throws std::invalid_argument like completeInputSpecs.
std::vector<c10::IValue> completeInputValues(const InputSet& set, const ir::Graph& forward,
                                             const std::string& givenText);

// What can be assumed safely when no shape was given: one tensor input (the
// first; any others have defaults and keep them) whose first use is a conv (1x C x 224x224 for conv2d, 224 for conv1d, 16x112x112
// for conv3d, C from the weight) or a linear (1 x in_features). `assumption`
// says what was assumed and from which op; nullopt when nothing is safe.
struct InferredInputs {
  std::vector<InputSpec> specs;
  std::string assumption;
};
std::optional<InferredInputs> inferInputSpecs(const ir::Graph& forward);
// The inputs every placeholder's metadata fully records (dtype and shape,
// what a torch.export program keeps); nullopt when one does not.
std::optional<std::vector<InputSpec>> recordedInputSpecs(const ir::Graph& forward);

// `value` with its containers typed as `type` says: LibTorch's unpickler
// reads a saved list as List[Any] (a generic dict as Dict[Any, Any]), which
// a method declared `List[Tensor]` rejects. Elements are retyped
// recursively; values are shared, not copied.
c10::IValue retypeInput(const c10::IValue& value, const c10::TypePtr& type);

// True for the model input types an InputSpec can build: Tensor, int,
// float, bool. Lists, tuples, dicts, optionals, strings and objects come
// from --inputs FILE only.
bool isBuildableInputType(const c10::TypePtr& type);
// A Python expression that builds an example value of `type`, for messages
// (`[torch.rand(3, 224, 224)]` for List[Tensor], `None` for Optional[...]).
std::string pythonExample(const c10::TypePtr& type);

std::vector<c10::IValue> makeInputs(const std::vector<InputSpec>& specs, uint64_t seed);
// Deep copy (tensors cloned), so in-place ops in one run cannot leak into the next.
std::vector<c10::IValue> cloneInputs(const std::vector<c10::IValue>& inputs);

}  // namespace ptopt::verify
