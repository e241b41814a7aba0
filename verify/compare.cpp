#include "verify/compare.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in <fmt/format.h> only before fmt 11)
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace ptopt::verify {

Tolerance Tolerance::forPrecision(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::BFloat16: return {5e-2, 1e-2, Criterion::Global, 0.99, 0};
    case c10::ScalarType::Half: return {1e-2, 1e-3, Criterion::Global, 0.99, 0};
    // int8 (quantize): the cosine is the criterion; the max-error bound only
    // catches gross failures (quantization error is a few % of the range).
    case c10::ScalarType::QInt8: return {0.3, 1e-2, Criterion::Global, 0.99, 0};
    default: return {};
  }
}

std::string Tolerance::str() const {
  std::string s = fmt::format("rtol {:g}, atol {:g}", rtol, atol);
  if (criterion == Criterion::Elementwise && scaleTol > 0) s += fmt::format(", scale-tol {:g} x rms", scaleTol);
  if (criterion == Criterion::Global)
    s += fmt::format(", global: cosine >= {:g} and max|a-b| <= atol + rtol*max|b|", minCosine);
  return s;
}

Tolerance ToleranceSet::forLeaf(const std::string& leaf) const {
  Tolerance t = base;
  if (auto it = rtolFor.find(leaf); it != rtolFor.end()) t.rtol = it->second;
  if (auto it = atolFor.find(leaf); it != atolFor.end()) t.atol = it->second;
  if (auto it = scaleTolFor.find(leaf); it != scaleTolFor.end()) t.scaleTol = it->second;
  return t;
}

std::vector<std::string> ToleranceSet::unknownNames(const std::vector<std::string>& leafNames) const {
  std::vector<std::string> unknown;
  for (const auto* m : {&rtolFor, &atolFor, &scaleTolFor})
    for (const auto& [name, value] : *m)
      if (std::find(leafNames.begin(), leafNames.end(), name) == leafNames.end()) unknown.push_back(name);
  return unknown;
}

namespace {

std::string childPath(const std::string& parent, size_t i) {
  return parent == "out" ? "out" + std::to_string(i) : fmt::format("{}[{}]", parent, i);
}

// Histogram of |a-b| by decade (only non-empty bins are kept).
std::vector<std::pair<std::string, int64_t>> errorHistogram(const at::Tensor& diff) {
  std::vector<std::pair<std::string, int64_t>> bins;
  auto add = [&](const std::string& label, const at::Tensor& mask) {
    const int64_t n = mask.sum().item<int64_t>();
    if (n > 0) bins.emplace_back(label, n);
  };
  add("0", diff == 0);
  double lo = 0;
  for (int e = -7; e <= 0; ++e) {
    const double hi = std::pow(10.0, e);
    add(e == -7 ? "<=1e-7" : fmt::format("<=1e{}", e), (diff > lo) & (diff <= hi));
    lo = hi;
  }
  add(">1", diff > 1);
  add("NaN", at::isnan(diff));
  return bins;
}

std::vector<int64_t> unravel(int64_t flat, at::IntArrayRef sizes) {
  std::vector<int64_t> index(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = sizes[d] ? flat % sizes[d] : 0;
    flat = sizes[d] ? flat / sizes[d] : 0;
  }
  return index;
}

void compareTensors(const at::Tensor& x, const at::Tensor& y, LeafComparison& leaf) {
  leaf.isTensor = true;
  leaf.numel = y.numel();
  if (x.sizes() != y.sizes()) {
    leaf.structureOk = false;
    leaf.problem = fmt::format("shape {} vs reference {}", fmt::join(x.sizes(), "x"), fmt::join(y.sizes(), "x"));
    return;
  }
  const bool sameType = x.scalar_type() == y.scalar_type();
  leaf.bitwiseEqual = sameType && x.device() == y.device() && at::equal(x, y);
  if (!sameType) {
    // A float output computed in another float type (keep-io=false) is
    // compared by value; any other dtype change is a failure.
    const bool bothFloat = at::isFloatingType(x.scalar_type()) && at::isFloatingType(y.scalar_type());
    leaf.problem = std::string("dtype ") + c10::toString(x.scalar_type()) + " vs reference " +
                   c10::toString(y.scalar_type());
    if (!bothFloat) leaf.structureOk = false;
  }
  if (leaf.numel == 0 || leaf.bitwiseEqual) return;
  const Tolerance& tol = leaf.tol;
  at::Tensor xd = x.detach().to(y.device()).to(at::kDouble), yd = y.detach().to(at::kDouble);
  at::Tensor same = (xd == yd) | (at::isnan(xd) & at::isnan(yd));
  at::Tensor diff = at::where(same, at::zeros_like(xd), (xd - yd).abs());
  at::Tensor finiteReference = at::isfinite(yd);
  leaf.newNan = (at::isnan(xd) & finiteReference).sum().item<int64_t>();
  leaf.newInf = (at::isinf(xd) & finiteReference).sum().item<int64_t>();
  at::Tensor diffNoNan = at::where(at::isnan(diff), at::zeros_like(diff), diff);
  at::Tensor absRef = at::where(finiteReference, yd.abs(), at::zeros_like(yd));
  leaf.maxAbs = diffNoNan.max().item<double>();
  leaf.maxAbsReference = absRef.max().item<double>();
  leaf.maxRel = (diffNoNan / yd.abs().clamp_min(1e-12)).max().item<double>();
  leaf.scale = absRef.square().mean().sqrt().item<double>();
  // The elementwise bound: the scaled one for fp32, atol + rtol*|b| under the
  // global criterion (where it only feeds the reported mismatch %).
  const double scaleTerm = tol.criterion == Criterion::Elementwise ? tol.scaleTol * leaf.scale : 0.0;
  at::Tensor bound = tol.atol + scaleTerm + tol.rtol * yd.abs();
  // NaN compares false, so a new NaN is a mismatch; equal elements (also
  // NaN where the reference is NaN) never are.
  leaf.mismatchFraction = ((diff <= bound).logical_not() & same.logical_not()).to(at::kDouble).mean().item<double>();
  at::Tensor xf = at::where(at::isfinite(xd), xd, at::zeros_like(xd));
  at::Tensor yf = at::where(finiteReference, yd, at::zeros_like(yd));
  const double nx = xf.norm().item<double>(), ny = yf.norm().item<double>();
  const double nd = (xf - yf).norm().item<double>();
  leaf.relativeL2 = ny > 0 ? nd / ny : nd > 0 ? INFINITY : 0.0;
  leaf.cosine = (nx == 0 && ny == 0) ? 1.0 : xf.flatten().dot(yf.flatten()).item<double>() / std::max(nx * ny, 1e-300);
  // The worst element is the one furthest beyond its bound.
  at::Tensor excess = at::where(same, at::zeros_like(diff),
                                at::where(at::isnan(diff) | at::isnan(bound), at::full_like(diff, INFINITY), diff / bound));
  const int64_t worst = excess.flatten().argmax().item<int64_t>();
  if (tol.criterion == Criterion::Elementwise) {
    leaf.errorToBound = excess.flatten()[worst].item<double>();
  } else {
    const double globalBound = tol.atol + tol.rtol * leaf.maxAbsReference;
    leaf.errorToBound = leaf.newNan ? INFINITY : globalBound > 0 ? leaf.maxAbs / globalBound
                                                 : leaf.maxAbs > 0 ? INFINITY : 0.0;
  }
  leaf.worstIndex = unravel(worst, y.sizes());
  leaf.worstActual = xd.flatten()[worst].item<double>();
  leaf.worstExpected = yd.flatten()[worst].item<double>();
  leaf.histogram = errorHistogram(diff);
  if (y.dim() == 2 && y.size(1) > 1 && at::isFloatingType(y.scalar_type()))
    leaf.top1Agreement = (xd.argmax(1) == yd.argmax(1)).to(at::kDouble).mean().item<double>();
}

void compareInto(const c10::IValue& a, const c10::IValue& b, const std::string& path, const ToleranceSet& tols,
                 std::vector<LeafComparison>& out) {
  LeafComparison leaf;
  leaf.path = path;
  leaf.tol = tols.forLeaf(path);
  auto mismatch = [&](const std::string& why) {
    leaf.structureOk = false;
    leaf.problem = why;
    out.push_back(leaf);
  };
  if (a.isTensor() != b.isTensor())
    return mismatch("one side is a tensor, the other a " + (a.isTensor() ? b : a).tagKind());
  if (a.isTensor()) {
    compareTensors(a.toTensor(), b.toTensor(), leaf);
    out.push_back(leaf);
    return;
  }
  if ((a.isTuple() || a.isList()) && (b.isTuple() || b.isList())) {
    if (a.isTuple() != b.isTuple())
      return mismatch(std::string(a.isTuple() ? "tuple" : "list") + " vs reference " + (b.isTuple() ? "tuple" : "list"));
    std::vector<c10::IValue> xs = a.isTuple() ? a.toTupleRef().elements().vec() : a.toListRef().vec();
    std::vector<c10::IValue> ys = b.isTuple() ? b.toTupleRef().elements().vec() : b.toListRef().vec();
    if (xs.size() != ys.size()) return mismatch(fmt::format("{} elements vs reference {}", xs.size(), ys.size()));
    for (size_t i = 0; i < xs.size(); ++i) compareInto(xs[i], ys[i], childPath(path, i), tols, out);
    return;
  }
  if (a.isGenericDict() && b.isGenericDict()) {
    auto da = a.toGenericDict(), db = b.toGenericDict();
    if (da.size() != db.size()) return mismatch(fmt::format("{} keys vs reference {}", da.size(), db.size()));
    for (const auto& entry : db) {
      const std::string key = entry.key().isString() ? entry.key().toStringRef()
                              : entry.key().isInt()  ? std::to_string(entry.key().toInt())
                                                     : entry.key().tagKind();
      auto it = da.find(entry.key());
      if (it == da.end()) {
        LeafComparison missing;
        missing.path = path + "." + key;
        missing.structureOk = false;
        missing.problem = "key missing";
        out.push_back(missing);
        continue;
      }
      compareInto(it->value(), entry.value(), path + "." + key, tols, out);
    }
    return;
  }
  if (a.tagKind() != b.tagKind()) return mismatch(a.tagKind() + " vs reference " + b.tagKind());
  leaf.bitwiseEqual = a == b;
  if (!leaf.bitwiseEqual) {
    leaf.problem = "values differ";
    leaf.mismatchFraction = 1;
  }
  out.push_back(leaf);
}

std::string formatIndex(const std::vector<int64_t>& index) { return fmt::format("[{}]", fmt::join(index, ", ")); }

}  // namespace

bool LeafComparison::passed() const {
  if (!structureOk) return false;
  if (bitwiseEqual) return true;
  if (!isTensor) return false;
  if (newNan > 0 || newInf > 0) return false;
  if (tol.criterion == Criterion::Elementwise) return mismatchFraction == 0;
  return cosine >= tol.minCosine && maxAbs <= tol.atol + tol.rtol * maxAbsReference;
}

double Comparison::maxErrorToBound() const {
  double worst = 0;
  for (const auto& l : leaves)
    if (l.isTensor && !l.bitwiseEqual) worst = std::max(worst, l.errorToBound);
  return worst;
}

bool Comparison::bitwiseEqual() const {
  for (const auto& l : leaves)
    if (!l.bitwiseEqual) return false;
  return true;
}

bool Comparison::withinTolerance() const {
  for (const auto& l : leaves)
    if (!l.passed()) return false;
  return true;
}

std::vector<std::string> Comparison::leafNames() const {
  std::vector<std::string> names;
  for (const auto& l : leaves) names.push_back(l.path);
  return names;
}

std::string Comparison::summary() const {
  std::string out;
  for (const auto& l : leaves) {
    if (!l.structureOk) {
      out += fmt::format("{}: structure differs: {}\n", l.path, l.problem);
      continue;
    }
    if (l.bitwiseEqual) {
      out += fmt::format("{}: bitwise-equal\n", l.path);
      continue;
    }
    out += fmt::format("{}: {} max_abs={:.3g} max_rel={:.3g} rms_ref={:.3g} err/bound={:.3g} mismatch={:.4g}% "
                       "cosine={:.6f}",
                       l.path, l.passed() ? "ok" : "FAIL", l.maxAbs, l.maxRel, l.scale, l.errorToBound,
                       100 * l.mismatchFraction, l.cosine);
    if (l.top1Agreement) out += fmt::format(" top1={:.1f}%", 100 * *l.top1Agreement);
    if (l.newNan || l.newInf) out += fmt::format(" new_nan={} new_inf={}", l.newNan, l.newInf);
    if (!l.problem.empty()) out += " (" + l.problem + ")";
    out += "\n";
  }
  return out;
}

std::string Comparison::failureReport() const {
  std::string out;
  for (const auto& l : leaves) {
    if (l.passed()) continue;
    out += fmt::format("  output {}:\n", l.path);
    if (!l.structureOk) {
      out += fmt::format("    structure differs: {}\n", l.problem);
      continue;
    }
    if (!l.isTensor) {
      out += "    values differ (non-tensor output)\n";
      continue;
    }
    out += fmt::format("    tolerance   {}\n", l.tol.str());
    out += fmt::format("    max abs     {:.6g}   (max |reference| {:.6g}, rms {:.6g})\n", l.maxAbs, l.maxAbsReference,
                       l.scale);
    if (l.tol.criterion == Criterion::Elementwise)
      out += fmt::format("    bound       |a-b| <= {:g} + {:g}*|b| + {:g}*{:.6g} (scale term {:.3g})\n", l.tol.atol,
                         l.tol.rtol, l.tol.scaleTol, l.scale, l.tol.scaleTol * l.scale);
    out += fmt::format("    err/bound   {:.4g}   (worst element; <= 1 passes)\n", l.errorToBound);
    out += fmt::format("    max rel     {:.6g}\n", l.maxRel);
    out += fmt::format("    mismatch    {:.4g}% of {} elements\n", 100 * l.mismatchFraction, l.numel);
    out += fmt::format("    cosine      {:.6f}\n", l.cosine);
    if (l.top1Agreement) out += fmt::format("    top-1       {:.2f}% agree\n", 100 * *l.top1Agreement);
    if (l.newNan || l.newInf) out += fmt::format("    new NaN {}, new Inf {} (reference finite there)\n", l.newNan, l.newInf);
    if (!l.problem.empty()) out += "    note        " + l.problem + "\n";
    out += fmt::format("    worst       at {}: got {:.8g}, expected {:.8g}\n", formatIndex(l.worstIndex),
                       l.worstActual, l.worstExpected);
    out += "    |a-b|       ";
    for (size_t i = 0; i < l.histogram.size(); ++i)
      out += fmt::format("{}{} {}", i ? "  " : "", l.histogram[i].first, l.histogram[i].second);
    out += "\n";
  }
  return out;
}

Comparison compareOutputs(const c10::IValue& actual, const c10::IValue& expected, const ToleranceSet& tol) {
  Comparison c;
  compareInto(actual, expected, "out", tol, c.leaves);
  return c;
}

nlohmann::json toJson(const LeafComparison& l) {
  nlohmann::json j = {{"output", l.path}, {"passed", l.passed()}, {"bitwise_equal", l.bitwiseEqual}};
  if (!l.problem.empty()) j["problem"] = l.problem;
  if (!l.structureOk || !l.isTensor) return j;
  j["rtol"] = l.tol.rtol;
  j["atol"] = l.tol.atol;
  j["criterion"] = l.tol.criterion == Criterion::Global ? "global"
                    : l.tol.scaleTol > 0                 ? "scaled-elementwise"
                                                         : "elementwise";
  if (l.tol.criterion == Criterion::Elementwise) {
    j["scale_tol"] = l.tol.scaleTol;
    j["scale_term"] = l.tol.scaleTol * l.scale;
  }
  j["numel"] = l.numel;
  j["max_abs"] = l.maxAbs;
  j["max_rel"] = l.maxRel;
  j["max_abs_reference"] = l.maxAbsReference;
  j["rms_reference"] = l.scale;
  // null when infinite (a new NaN, or a zero bound).
  j["error_to_bound"] = std::isfinite(l.errorToBound) ? nlohmann::json(l.errorToBound) : nlohmann::json(nullptr);
  j["mismatch_percent"] = 100 * l.mismatchFraction;
  j["cosine"] = l.cosine;
  j["relative_l2"] = std::isfinite(l.relativeL2) ? nlohmann::json(l.relativeL2) : nlohmann::json(nullptr);
  j["new_nan"] = l.newNan;
  j["new_inf"] = l.newInf;
  if (l.top1Agreement) j["top1_agreement"] = *l.top1Agreement;
  if (!l.bitwiseEqual) {
    j["worst"] = {{"index", l.worstIndex}, {"actual", l.worstActual}, {"expected", l.worstExpected}};
    nlohmann::json h = nlohmann::json::object();
    for (const auto& [bin, n] : l.histogram) h[bin] = n;
    j["abs_error_histogram"] = h;
  }
  return j;
}

}  // namespace ptopt::verify
