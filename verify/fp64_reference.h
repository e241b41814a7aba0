// The original model run in float64: the reference that judges a result
// when the fp32 original cannot.
//
// On an ill-conditioned model (one that amplifies rounding: a one-ulp change
// of its weights moves its output by percents) the fp32 original is itself
// far from the exact function, and a correct rewrite, which only rounds
// differently, misses the fp32 criterion. ReferenceRunner (runner.h) then
// asks this reference: the original's own graph, imported into ptopt's IR
// (ir::importModule, no pass runs on it), its floating constants and inputs
// in float64 on the verification device, run by ir::Interpreter through the
// real ATen operators.
//
// Per operator: a call that fails in float64 is retried with every float32
// tensor among its arguments in float64 (a tensor the graph itself made in
// float32 meeting the float64 ones); an operator that still fails (no
// float64 kernel) runs in float32 on its arguments rounded to float32, its
// results go back to float64, and it is named in keptFp32(). An operator
// that creates float32 tensors or casts to float32 (`x.float()`) keeps doing
// so: the reference is then float64 except at those points, as the model
// asks. Stochastic ops see the seed the fp32 runs saw.
#pragma once

#include "ir/model.h"

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <torch/script.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::verify {

class Fp64Reference {
 public:
  // Imports `reference` and converts its floating constants. With
  // `perturbSeed`, every float32 constant is moved, in float64, by a seeded
  // uniform draw within half its float32 ulp: the model as float32 storage
  // could equally have rounded it, whose distance from the unperturbed run
  // is the noise that rounding weights to float32 (a fold does) amounts to.
  // Throws std::runtime_error naming the reason when the model cannot be
  // imported.
  Fp64Reference(const torch::jit::Module& reference, c10::Device device,
                std::optional<uint64_t> perturbSeed = std::nullopt);
  ~Fp64Reference();
  Fp64Reference(const Fp64Reference&) = delete;
  Fp64Reference& operator=(const Fp64Reference&) = delete;

  // The model's output on `inputs` (on the CPU, as InputSource gives them;
  // floating tensors are converted to float64 on the device), with the
  // global generator seeded with `seed`. Throws std::runtime_error.
  c10::IValue run(const std::vector<c10::IValue>& inputs, uint64_t seed);
  // The operators that ran in float32 ("`%y = aten::op(...)`"), in first-run order.
  const std::vector<std::string>& keptFp32() const { return keptFp32_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<std::string> keptFp32_;
};

// `v` with every floating tensor of type `from` (inside lists, tuples and
// dicts too) converted to `to`; other values as they are.
c10::IValue castFloatTensors(const c10::IValue& v, at::ScalarType from, at::ScalarType to);

}  // namespace ptopt::verify
