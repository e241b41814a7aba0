// Example inputs for running and verifying models.
//
// A spec describes one model input: a tensor (`1,3,224,224`, optionally
// named `x:1,3,224,224`, optionally typed `2,7:int64`) or a scalar. Tensors
// are drawn from a seeded generator: float types from a standard normal,
// integer types uniformly from [low, high).
#pragma once

#include <ATen/core/ivalue.h>
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <vector>

namespace ptopt::verify {

struct InputSpec {
  enum class Kind { Tensor, Int, Float, Bool };
  Kind kind = Kind::Tensor;
  std::string name;               // optional, for messages
  std::vector<int64_t> shape;     // tensors
  c10::ScalarType dtype = c10::ScalarType::Float;
  int64_t low = 0, high = 100;    // integer tensors: values in [low, high)
  double scalar = 0;              // scalars

  std::string str() const;
};

// Parses `1,3,224,224`, `name:1,3,224,224`, `2,7:int64`, `name:2,7:int64`,
// `int:3`, `float:0.5`, `bool:1`. Throws std::invalid_argument naming the
// problem.
InputSpec parseInputSpec(const std::string& text);
// The fixture manifest form: {"type":"tensor","shape":[..],"dtype":"int64",
// "low":0,"high":100} or {"type":"int","value":3}.
InputSpec inputSpecFromJson(const nlohmann::json& j);

std::vector<c10::IValue> makeInputs(const std::vector<InputSpec>& specs, uint64_t seed);
// Deep copy (tensors cloned), so in-place ops in one run cannot leak into the next.
std::vector<c10::IValue> cloneInputs(const std::vector<c10::IValue>& inputs);

}  // namespace ptopt::verify
