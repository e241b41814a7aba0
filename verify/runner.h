// Runs a reference model and candidates on the same inputs and device, and
// compares their outputs (compare.h).
//
// Both models run through LibTorch's graph executor with its optimizer off by
// default (Executor::Plain): the ops of the saved graph run as written, and a
// run costs time linear in the graph. The optimizing (profiling) executor
// spends its first two runs profiling and re-optimizing the graph, which is
// superlinear in the graph's size (7 s for a 6,000-node stack, minutes for
// 60,000) and, on the CPU, gives bitwise the same results on the fixtures.
// Executor::Optimizing runs what deployment runs, JIT fusers included (on
// CUDA they may change results within rounding).
//
// The reference runs once per input set when the runner is built and its
// outputs are cached, so checking many candidates (one after every pass with
// --verify-each) costs one candidate run each. Both run on one device:
// `auto` picks CUDA when torch::cuda::is_available(), else the CPU. On CUDA,
// TF32 is switched off (cuBLAS and cuDNN) so the fp32 reference is exact fp32.
// Stochastic models see the same RNG state: the global generator is seeded
// with the input set's seed before each run.
#pragma once

#include "verify/compare.h"
#include "verify/inputs.h"

#include <c10/core/Device.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/script.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptopt::verify {

// "auto", "cpu", "cuda" or "cuda:N". Throws std::invalid_argument when CUDA
// is asked for and not available, or the name is unknown.
c10::Device resolveDevice(const std::string& name);
// "cpu" or "cuda:0 (NVIDIA H200)".
std::string describeDevice(c10::Device device);

// Where the inputs come from: seeded specs (one set per iteration) or a fixed
// set loaded from a file (one iteration).
enum class Executor { Plain, Optimizing };
// "plain" or "optimizing"; throws std::invalid_argument for anything else.
Executor parseExecutor(const std::string& name);
std::string executorName(Executor e);

struct InputSource {
  std::vector<InputSpec> specs;
  std::optional<std::vector<c10::IValue>> fixed;
  int iterations = 3;
  uint64_t seed = 0;
  Executor executor = Executor::Plain;  // how both models run (see the top)
  int count() const { return fixed ? 1 : iterations; }
  uint64_t seedFor(int i) const { return seed + static_cast<uint64_t>(i); }
  std::vector<c10::IValue> inputsFor(int i) const;  // on the CPU
  std::string describe() const;                     // "3 seeded runs (seed 0) of 1,3,224,224"
  std::string describeInputs() const;               // "1,3,224,224" or "2 input(s) from --inputs"
};

// The reference model fails on the inputs: bad input (exit 2).
class ReferenceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct IterationResult {
  uint64_t seed = 0;
  Comparison comparison;
  std::string runError;  // the candidate threw
  bool passed() const { return runError.empty() && comparison.withinTolerance(); }
};

struct VerifyReport {
  bool passed = false;
  bool bitwiseEqual = false;
  std::string device;
  std::string inputs;        // InputSource::describe()
  std::string executor;      // executorName()
  std::vector<std::string> notes;  // e.g. fp16 emulation
  std::vector<IterationResult> iterations;

  const IterationResult* firstFailure() const;
  // The largest error relative to its bound over all iterations and outputs
  // (LeafComparison::errorToBound; 0 when bitwise equal).
  double maxErrorToBound() const;
  // One line: "passed within tolerance (3 seeded runs ..., rtol .., atol ..,
  // scale-tol .. x rms; worst error 3.1% of its bound)".
  std::string verdict() const;
  // The failing iteration's per-output blocks (empty when passed).
  std::string failureReport() const;
  nlohmann::json toJson() const;
};

class ReferenceRunner {
 public:
  // Moves `reference` to `device` and runs it on every input set. Throws
  // ReferenceError naming the model's inputs when it fails on them.
  ReferenceRunner(torch::jit::Module reference, InputSource inputs, ToleranceSet tolerances, c10::Device device,
                  std::vector<std::string> modelInputNames = {});
  // Runs `candidate` (moved to the device) on the same inputs and compares.
  VerifyReport check(torch::jit::Module candidate) const;

  const InputSource& inputs() const { return inputs_; }
  const ToleranceSet& tolerances() const { return tolerances_; }
  void setTolerances(ToleranceSet t) { tolerances_ = std::move(t); }
  c10::Device device() const { return device_; }
  std::vector<std::string> notes;  // copied into every report
  // Converts the inputs for the candidate (a model whose signature changed,
  // e.g. cast{keep-io=false}); identity when empty.
  std::function<std::vector<c10::IValue>(std::vector<c10::IValue>)> inputAdapter;

 private:
  InputSource inputs_;
  ToleranceSet tolerances_;
  c10::Device device_;
  std::vector<c10::IValue> referenceOutputs_;
};

// Deep-copies tensors (also inside lists, tuples and dicts) onto `device`.
c10::IValue toDevice(const c10::IValue& v, c10::Device device);

}  // namespace ptopt::verify
