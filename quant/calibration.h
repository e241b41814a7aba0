// Calibration data for int8 quantization (the quantize pass).
//
// The data is a list of batches, each one full argument list of the model's
// forward (tensors, in input order). The CLI loads it from `--calibration
// FILE` (the `--inputs` formats holding a list of batches) and hands it to
// the passes it runs through a CalibrationScope; a quantize pass that finds
// none calibrates on seeded random inputs shaped like PassContext's example
// inputs, and says loudly that accuracy needs real data.
#pragma once

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace ptopt::quant {

struct CalibrationData {
  std::vector<std::vector<c10::IValue>> batches;
  std::string source;  // for messages: the file, or "random"
  bool synthetic = false;
};

// Makes `data` the calibration set of the quantize passes run while the
// scope lives (scopes nest; the innermost wins).
class CalibrationScope {
 public:
  explicit CalibrationScope(CalibrationData data);
  ~CalibrationScope();
  CalibrationScope(const CalibrationScope&) = delete;
  CalibrationScope& operator=(const CalibrationScope&) = delete;

 private:
  std::optional<CalibrationData> previous_;
  bool hadPrevious_ = false;
};

// The calibration set of the innermost scope, or null.
const CalibrationData* currentCalibration();

// Splits a loaded `--calibration` value into batches: a list or tuple of
// batches, where a batch is a tensor (one-input model) or a tuple/list of
// the inputs. Throws std::invalid_argument naming what is wrong: no batch,
// a non-float or non-finite (NaN/Inf) tensor, a batch whose number of
// inputs is not `numInputs`, or batches whose shapes disagree beyond the
// batch dimension; with `expected` (the --input-shape example inputs),
// every tensor must have the rank and non-batch sizes of its example.
std::vector<std::vector<c10::IValue>> splitCalibrationBatches(const std::vector<c10::IValue>& values,
                                                              size_t numInputs,
                                                              const std::vector<c10::IValue>* expected,
                                                              const std::string& source);

// Seeded random batches shaped like `example` (float tensors from a standard
// normal; other values copied).
std::vector<std::vector<c10::IValue>> randomCalibrationBatches(const std::vector<c10::IValue>& example,
                                                               size_t count, uint64_t seed);

}  // namespace ptopt::quant
