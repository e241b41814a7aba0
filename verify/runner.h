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
#include <memory>
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
  // Runs 1, 2, ... at these specs instead (a dynamic program's other sizes);
  // run 0 and runs past them at `specs`.
  std::vector<std::vector<InputSpec>> otherSizes;
  // Adds a run at each of these sizes (one list of sizes per input, in
  // order): `specs` with those shapes.
  void addOtherSizes(const std::vector<std::vector<std::vector<int64_t>>>& sizes);
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

// The float64 reference (fp64_reference.h), asked only when a result misses
// the criterion against the fp32 original on numbers alone (structure,
// shapes and dtypes right, no new NaN or Inf). An ill-conditioned model's
// fp32 original is itself far from float64 (the conditioning probe: its
// relative error over float32's unit roundoff is how much the model
// amplifies rounding), and a correct rewrite rounds differently: against the
// fp32 original it misses; against float64 it is judged, per output leaf
// that missed:
//   fp32 criterion (scaled elementwise): the rewrite itself, in float64 —
//     OUT's own graph run in float64 (its constants promoted) must be as
//     close to the original's float64 run as rounding the weights to
//     float32 puts it: ||OUT64 - r64|| <= kFp64Margin * ||r64' - r64|| plus
//     one float32 unit roundoff of ||r64||, where r64' is the original in
//     float64 with its float32 weights moved within half an ulp (relative
//     L2). Arithmetic rounding is gone from both sides, so a wrong fold or
//     constant shows at its full size however the model amplifies rounding.
//     And OUT as it runs, in fp32, may be at most kFp32NoiseMargin times as
//     far from float64 as the fp32 original (a rewrite that is right but
//     makes fp32 rounding much worse is refused). Where OUT has operators
//     without a float64 kernel (packed kernels), OUT64 is not exact: OUT's
//     fp32 distance must then be within kFp64Margin of the original's.
//   global criterion (bf16, fp16, int8): the same criterion (cosine, max
//     error bound) met against float64 instead of the fp32 original.
inline constexpr double kFp64Margin = 2.0;
inline constexpr double kFp32NoiseMargin = 4.0;
inline constexpr double kFloat32UnitRoundoff = 5.9604644775390625e-8;  // 2^-24

struct Fp64Leaf {
  std::string path;
  bool global = false;               // judged by the global criterion against float64
  double resultRel = 0, originalRel = 0;        // relative L2 distance from float64
  double resultMaxAbs = 0, originalMaxAbs = 0;  // max |x - r64|
  double resultCosine = 1;
  // The rewrite in float64 (fp32 criterion only): OUT64's distance from the
  // original's float64 run, and the weight-rounding noise it is held to;
  // exact is false when OUT64 ran operators in fp32.
  double rewriteRel = 0, weightNoiseRel = 0;
  bool exact = false;
  bool passedFp32 = false;           // met the criterion against the fp32 original already
  bool passed = false;               // by the fp32 criterion, or else by the float64 rule
};

struct Fp64Check {
  std::vector<Fp64Leaf> leaves;
  std::string error;  // the float64 reference could not be run
  bool passed() const;
};

struct IterationResult {
  uint64_t seed = 0;
  Comparison comparison;
  std::string runError;  // the candidate threw
  std::optional<Fp64Check> fp64;  // asked when the fp32 criterion was missed on numbers alone
  bool passed() const {
    return runError.empty() && (comparison.withinTolerance() || (fp64 && fp64->passed()));
  }
  // Passed because of the float64 reference.
  bool decidedByFp64() const { return passed() && !comparison.withinTolerance(); }
};

// What the float64 reference cost and showed (VerifyReport::fp64).
struct Fp64Summary {
  double ms = 0;                      // building it and its runs
  std::vector<std::string> keptFp32;  // operators without a float64 kernel
  double originalRel = 0;             // the fp32 original's worst relative L2 distance from float64
  std::string error;                  // it could not be run
  // How much the model amplifies rounding: the original's distance from
  // float64 in units of float32's unit roundoff.
  double amplification() const { return originalRel / kFloat32UnitRoundoff; }
};

struct VerifyReport {
  bool passed = false;
  bool bitwiseEqual = false;
  std::string device;
  std::string inputs;        // InputSource::describe()
  std::string executor;      // executorName()
  std::vector<std::string> notes;  // e.g. fp16 emulation
  std::vector<IterationResult> iterations;
  std::optional<Fp64Summary> fp64;  // when the float64 reference was asked

  const IterationResult* firstFailure() const;
  bool decidedByFp64() const;  // passed, and some input set only by the float64 reference
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
  ReferenceRunner(ReferenceRunner&&) noexcept;
  ReferenceRunner& operator=(ReferenceRunner&&) noexcept;
  ~ReferenceRunner();
  // Runs `candidate` (moved to the device) on the same inputs and compares;
  // where it misses the criterion on numbers alone, asks the float64
  // reference (see Fp64Check).
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
  torch::jit::Module reference_;
  // The float64 reference, built on first need; its outputs per input set.
  struct Fp64State;
  std::unique_ptr<Fp64State> fp64_;
  Fp64Check judgeAgainstFp64(int iteration, const c10::IValue& actual, const Comparison& fp32,
                             const torch::jit::Module& candidate, Fp64Summary& summary) const;
};

// Deep-copies tensors (also inside lists, tuples and dicts) onto `device`.
c10::IValue toDevice(const c10::IValue& v, c10::Device device);

}  // namespace ptopt::verify
