// Compares model outputs by structure and value.
//
// Outputs are flattened from tensors, tuples, lists and dicts into leaves
// named by their path (`out`, `out[1]`, `out["logits"]`); a difference in
// structure (a tuple of 2 against a tuple of 3, a tensor against a list) is a
// failure that says where. Each tensor leaf gets its metrics.
#pragma once

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace ptopt::verify {

struct LeafComparison {
  std::string path;
  bool bitwiseEqual = false;
  bool structureOk = true;
  std::string problem;       // structure or dtype/shape mismatch
  double maxAbs = 0, maxRel = 0;
  double mismatchFraction = 0;  // elements outside atol + rtol*|b|
  double cosine = 1;
  int64_t numel = 0;
};

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
};

struct Comparison {
  std::vector<LeafComparison> leaves;
  bool bitwiseEqual() const;
  bool withinTolerance() const;  // every element within atol + rtol*|b|
  std::string summary() const;   // one line per leaf
};

// `actual` vs `expected` (the reference).
Comparison compareOutputs(const c10::IValue& actual, const c10::IValue& expected,
                          const Tolerance& tol = {});

}  // namespace ptopt::verify
