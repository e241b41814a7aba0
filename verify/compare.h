// Compares model outputs by structure and value.
//
// Outputs are flattened from tensors, tuples, lists and dicts into leaves
// named by their path: a single tensor is `out`; the elements of a returned
// tuple or list are `out0`, `out1`, ...; deeper elements add `[i]`, dict
// entries add `.key` (`out1[0]`, `out.logits`). Those names are what
// per-output tolerances (`--atol out1:1e-3`) refer to. A difference in
// structure (a tuple of 2 against a tuple of 3, a tensor against a list) is a
// failure that says where.
//
// Each tensor leaf gets: max abs and max rel error, mismatch fraction under
// |a-b| <= atol + rtol*|b|, cosine similarity, NaN/Inf newly introduced (where
// the reference is finite), top-1 agreement for 2-D float outputs
// (classifier-like: rows are samples), the worst element (index, both values)
// and a histogram of |a-b| by decade.
//
// Two acceptance criteria (DESIGN.md, "Verification"):
//  - Elementwise (fp32 pipelines): every element within atol + rtol*|b|.
//  - Global (bf16/fp16 pipelines, whose error accumulates over a network):
//    cosine >= minCosine and max|a-b| <= atol + rtol*max|b|; the elementwise
//    mismatch % is still reported.
// Newly introduced NaN/Inf and structure, shape or dtype differences fail
// under both.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json_fwd.hpp>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ptopt::verify {

enum class Criterion { Elementwise, Global };

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
  Criterion criterion = Criterion::Elementwise;
  double minCosine = 0.99;  // Global only

  // The defaults for a pipeline whose lowest precision is `dtype`: fp32
  // (1e-4, 1e-5) elementwise; bf16 (5e-2, 1e-2) and fp16 (1e-2, 1e-3) global.
  static Tolerance forPrecision(c10::ScalarType dtype);
  std::string str() const;  // "rtol 0.0001, atol 1e-05"
};

// A base tolerance plus per-output overrides (by leaf name).
struct ToleranceSet {
  Tolerance base;
  std::map<std::string, double> rtolFor, atolFor;
  Tolerance forLeaf(const std::string& leaf) const;
  // Override names that match no leaf of `leafNames` (typos).
  std::vector<std::string> unknownNames(const std::vector<std::string>& leafNames) const;
};

struct LeafComparison {
  std::string path;
  bool structureOk = true;
  std::string problem;  // structure, shape or dtype difference
  bool bitwiseEqual = false;
  bool isTensor = false;
  Tolerance tol;  // what it was judged by
  int64_t numel = 0;
  double maxAbs = 0, maxRel = 0;
  double maxAbsReference = 0;
  double mismatchFraction = 0;  // elements outside atol + rtol*|b|
  double cosine = 1;
  int64_t newNan = 0, newInf = 0;  // non-finite where the reference is finite
  std::optional<double> top1Agreement;
  std::vector<int64_t> worstIndex;
  double worstActual = 0, worstExpected = 0;
  std::vector<std::pair<std::string, int64_t>> histogram;  // "<1e-6": count

  bool passed() const;
};

struct Comparison {
  std::vector<LeafComparison> leaves;
  bool bitwiseEqual() const;
  bool withinTolerance() const;
  std::vector<std::string> leafNames() const;
  std::string summary() const;       // one line per leaf
  std::string failureReport() const; // a block per failing leaf: metrics, worst element, histogram
};

// `actual` vs `expected` (the reference).
Comparison compareOutputs(const c10::IValue& actual, const c10::IValue& expected, const ToleranceSet& tol);
inline Comparison compareOutputs(const c10::IValue& actual, const c10::IValue& expected,
                                 const Tolerance& tol = {}) {
  return compareOutputs(actual, expected, ToleranceSet{tol, {}, {}});
}

nlohmann::json toJson(const LeafComparison& leaf);

}  // namespace ptopt::verify
