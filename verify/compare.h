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
// Each tensor leaf gets: max abs and max rel error, the scale of the
// reference (the RMS of its finite elements), the mismatch fraction (elements
// outside the criterion's elementwise bound), the error relative to the bound
// (max over elements of |a-b| / bound: <= 1 passes), cosine similarity,
// NaN/Inf newly introduced (where the reference is finite), top-1 agreement
// for 2-D float outputs (classifier-like: rows are samples), the worst element
// (the one furthest beyond its bound: index, both values) and a histogram of
// |a-b| by decade.
//
// Two acceptance criteria (DESIGN.md, "Verification"):
//  - Scaled elementwise (fp32 pipelines): every element within
//        |a-b| <= atol + rtol*|b| + scaleTol*rms(b)
//    where rms(b) is the RMS of that output's finite reference elements.
//    fp32 rounding error accumulates at the scale of the sums inside the
//    network, not of each output element: an output element near zero in a
//    large-scale output carries the error of the large terms that cancelled
//    to make it (a correct BN fold of ResNet-50 with random weights: max
//    error 5.5e-4, 8.2e-4 with AVX2 kernels, on logits of RMS 333, where the
//    plain (1e-4, 1e-5) bound allows 1e-5 for a logit near zero). rtol*|b|
//    bounds the error of large elements, scaleTol*rms(b) that of small
//    elements of a large-scale output, atol that of an output that is
//    (nearly) all zeros. The RMS, not max|b|, is
//    the scale: one large element (an outlier, a box coordinate) does not
//    loosen every other element. Defaults (1e-4, 1e-5, 1e-5) were chosen
//    from measurements on torchvision models at -O1/-O2, with AVX-512 and
//    AVX2 kernels, against a mutation suite (README, "Verification";
//    tests/verify/mutation_suite.cpp). Each term is set on its own
//    (--rtol, --atol, --scale-tol); --scale-tol 0 gives the plain elementwise
//    check |a-b| <= atol + rtol*|b|.
//  - Global (bf16/fp16 pipelines, whose error accumulates over a network):
//    cosine >= minCosine and max|a-b| <= atol + rtol*max|b|; the elementwise
//    mismatch % (under atol + rtol*|b|) is still reported. scaleTol is not
//    used (the bound is already relative to the output's range).
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

// The fp32 default of Tolerance::scaleTol (see the top).
inline constexpr double kDefaultScaleTol = 1e-5;

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
  Criterion criterion = Criterion::Elementwise;
  double minCosine = 0.99;  // Global only
  double scaleTol = kDefaultScaleTol;  // Elementwise only: a multiple of rms(reference)

  // The defaults for a pipeline whose lowest precision is `dtype`: fp32
  // (rtol 1e-4, atol 1e-5, scaleTol 1e-5) scaled elementwise; bf16
  // (5e-2, 1e-2) and fp16 (1e-2, 1e-3) global.
  static Tolerance forPrecision(c10::ScalarType dtype);
  // Strict elementwise |a-b| <= atol + rtol*|b| (no scale term).
  static Tolerance elementwise(double rtol, double atol) { return {rtol, atol, Criterion::Elementwise, 0.99, 0}; }
  std::string str() const;  // "rtol 0.0001, atol 1e-05, scale-tol 1e-05 x rms"
};

// A base tolerance plus per-output overrides (by leaf name).
struct ToleranceSet {
  Tolerance base;
  std::map<std::string, double> rtolFor, atolFor, scaleTolFor;
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
  double scale = 0;             // rms of the finite reference elements
  double relativeL2 = 0;        // ||a-b|| / ||b|| over the finite elements (0 when ||b|| is 0 and a == b)
  double mismatchFraction = 0;  // elements outside the elementwise bound (see the top)
  // max |a-b| / bound: the scaled elementwise bound per element, or for the
  // global criterion max|a-b| / (atol + rtol*max|b|). <= 1 is within bound
  // (the global criterion also needs the cosine); inf for a NaN or a zero bound.
  double errorToBound = 0;
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
  double maxErrorToBound() const;  // over tensor leaves (0 when all are bitwise equal)
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
