// Op signatures: what a measured decision depends on, as the key of the
// tuning cache (tune/cache.h), and the inputs a micro-benchmark runs the op on.
//
// Contract. opSignature(n) is the op's qualified name and overload, then one
// item per argument: a tensor as dtype, shape and memory format (constants
// from the tensor itself, activations from shape-prop metadata), a literal as
// its text. Two nodes with the same signature run the same kernel on the same
// sizes, in any model, so a decision measured for one holds for the other.
// Names, scopes and weight values are not in it. It is nullopt (with `why`)
// when an activation's dtype or shape is unknown. benchArguments(n) makes the
// arguments to run `n` alone: constants as they are (on `device`), activations
// as seeded random tensors of their recorded dtype, shape and memory format,
// literals as their IValues.
#pragma once

#include "ir/ir.h"

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <optional>
#include <string>
#include <vector>

namespace ptopt::tune {

std::optional<std::string> opSignature(const ir::Node& n, std::string& why);
// "f32[1,64,56,56]:cl" for a tensor value (constant or with metadata), or nullopt.
std::optional<std::string> tensorSignature(const ir::Value& v);

// A conv region's signature (channels-last per region, tune/tune_model.h):
// its nodes in order, each as its op and arguments, where a value computed
// inside the region is referred to by position ($k, or $k.i for the i-th
// result), a list by its elements, a tensor from outside by
// tensorSignature, a literal by its text; '!' marks a node whose result is
// read outside the region (an exit conversion). Two regions with the same
// signature compute the same ops on the same shapes with the same
// conversions, in any model. nullopt (with `why`) when a tensor's dtype or
// shape is unknown.
std::optional<std::string> regionSignature(const std::vector<const ir::Node*>& nodes, std::string& why);

std::optional<std::vector<c10::IValue>> benchArguments(const ir::Node& n, c10::Device device, std::string& why);

// A stable digest (FNV-1a, hex) of a text: whole-model decisions are keyed by
// the digest of the graph's text and the input shapes.
std::string digest(const std::string& text);

// The example inputs a whole-model decision was timed on, for its key:
// "f32[1x3x224x224],int" (a tensor's dtype and sizes, else its tag).
std::string inputsSignature(const std::vector<c10::IValue>& inputs);

}  // namespace ptopt::tune
