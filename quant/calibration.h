// Calibration data for int8 quantization (the quantize pass).
//
// The data is a list of batches, each one full argument list of the model's
// forward (tensors, in input order). The CLI loads it from `--calibration
// FILE` (the `--inputs` formats holding a list of batches), Python from
// `calibration=[batch, ...]`; the run's calibration stage (driver/stages.h)
// checks it and hands it to the passes as side data on their context
// (`ctx.inputs.set(CalibrationData{...})`, rewriters/side_data.h). A quantize
// pass that finds none calibrates on seeded random inputs shaped like
// PassContext's example inputs, and warns that accuracy needs real data.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace ptopt::quant {

struct CalibrationData {
  std::vector<std::vector<c10::IValue>> batches;
  std::string source;  // for messages: the file, or "random"
  bool synthetic = false;
};

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
